package skills

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// DefaultMaxResultBytes is Config.MaxResultBytes when it is zero: 8 MiB.
const DefaultMaxResultBytes = 8 << 20

// Attachment describes one non-text item of a tool result: an image,
// audio, an embedded resource or a resource link. Its data is never part
// of the result; Ref says where it is stored.
type Attachment struct {
	// Kind is "image", "audio", "resource" or "resource_link".
	Kind     string `json:"kind"`
	MimeType string `json:"mime_type,omitempty"`
	// URI is a resource's or a resource link's.
	URI string `json:"uri,omitempty"`
	// Size and SHA256 are the decoded data's; a resource link has none.
	Size   int    `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Ref is where the data is stored, empty when it is not.
	Ref string `json:"ref,omitempty"`
}

// AttachmentStore keeps the data of attachments. Put stores data for
// tenant and returns its reference; the same data stored twice for a
// tenant has the same reference.
type AttachmentStore interface {
	Put(ctx context.Context, tenant string, a Attachment, data []byte) (ref string, err error)
}

// attachmentData is an attachment with its decoded data, before storage.
type attachmentData struct {
	Attachment
	data []byte
}

// attachments describes the non-text items of r, with their data put in
// the tenant's Config.Attachments when there is one. Every item's data is
// checked against Config.MaxResultBytes before any is stored.
func (c *Client) attachments(ctx context.Context, tenant string, r *mcp.CallToolResult) ([]Attachment, error) {
	var items []attachmentData
	for _, content := range r.Content {
		item, ok, err := decodeItem(content)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if err := c.checkSize(item.Kind, len(item.data)); err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	out := make([]Attachment, len(items))
	for i, item := range items {
		if item.Kind != mcp.ContentTypeLink && c.cfg.Attachments != nil {
			ref, err := c.cfg.Attachments.Put(ctx, tenant, item.Attachment, item.data)
			if err != nil {
				return nil, fmt.Errorf("skills: store %s attachment: %w", item.Kind, err)
			}
			item.Ref = ref
		}
		out[i] = item.Attachment
	}
	return out, nil
}

// decodeItem decodes one content item of a result; ok is false for a text
// item, or one of a kind it does not know.
func decodeItem(content mcp.Content) (item attachmentData, ok bool, err error) {
	var data []byte
	switch v := content.(type) {
	case mcp.ImageContent:
		item.Kind, item.MimeType = mcp.ContentTypeImage, v.MIMEType
		data, err = decodeBase64(item.Kind, v.Data)
	case mcp.AudioContent:
		item.Kind, item.MimeType = mcp.ContentTypeAudio, v.MIMEType
		data, err = decodeBase64(item.Kind, v.Data)
	case mcp.EmbeddedResource:
		item.Kind = mcp.ContentTypeResource
		switch res := v.Resource.(type) {
		case mcp.TextResourceContents:
			item.MimeType, item.URI, data = res.MIMEType, res.URI, []byte(res.Text)
		case mcp.BlobResourceContents:
			item.MimeType, item.URI = res.MIMEType, res.URI
			data, err = decodeBase64(item.Kind, res.Blob)
		default:
			return item, false, nil
		}
	case mcp.ResourceLink:
		item.Kind, item.MimeType, item.URI = mcp.ContentTypeLink, v.MIMEType, v.URI
		return item, true, nil
	default:
		return item, false, nil
	}
	if err != nil {
		return item, false, err
	}
	sum := sha256.Sum256(data)
	item.data, item.Size, item.SHA256 = data, len(data), hex.EncodeToString(sum[:])
	return item, true, nil
}

func decodeBase64(kind, s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s data is not base64: %v", ErrInvalidResponse, kind, err)
	}
	return b, nil
}

// checkSize reports a result part (its text, or one attachment's data) of
// size bytes over Config.MaxResultBytes.
func (c *Client) checkSize(part string, size int) error {
	if size > c.cfg.MaxResultBytes {
		return fmt.Errorf("%w: %s of %d bytes exceeds the cap of %d bytes", ErrResultTooLarge, part, size, c.cfg.MaxResultBytes)
	}
	return nil
}
