package ingress

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/agentbus/agentbus/api"
)

// The web dashboard: a static page (HTML, CSS and JavaScript embedded in the
// binary, no build step, nothing fetched from elsewhere) that reads the
// tenant-scoped API from the browser: fleet health (GET /agent/health),
// recent runs (GET /agent/runs), recent alerts (GET /agent/audit/events) and
// a run viewer drawing a plan's trace as a timeline and its provenance DAG
// (GET /agent/plans/{plan_id}, .../trace, .../trace?view=dag).
//
// The page and its assets are served without authentication (they hold no
// data); every API call the page makes is authenticated as usual, with the
// tenant in X-Tenant-Id and an optional bearer credential.

//go:embed dashboard
var dashboardFS embed.FS

// dashboardTypes are the Content-Types of the dashboard's assets.
var dashboardTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

// dashboardCSP admits scripts, styles, images and API calls from the
// ingress itself only; no inline script or style, no frames.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// isDashboardPath says whether path names the dashboard page or one of its
// assets: /dashboard, /dashboard/ or /dashboard/<file> (one plain segment).
// The authentication middleware lets exactly these through.
func isDashboardPath(p string) bool {
	if p == "/dashboard" || p == "/dashboard/" {
		return true
	}
	name, ok := strings.CutPrefix(p, "/dashboard/")
	return ok && validAssetName(name)
}

func validAssetName(name string) bool {
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, ".") || len(name) > 128 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// dashboard serves GET /dashboard (and /dashboard/): the page; and GET
// /dashboard/{file}: its assets.
func (g *Ingress) dashboard(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "" {
		name = "index.html"
	}
	ctype, known := dashboardTypes[path.Ext(name)]
	if !validAssetName(name) || !known {
		WriteError(w, http.StatusNotFound, "not_found", "no dashboard asset "+name)
		return
	}
	body, err := fs.ReadFile(dashboardFS, "dashboard/"+name)
	if err != nil {
		WriteError(w, http.StatusNotFound, "not_found", "no dashboard asset "+name)
		return
	}
	writeStatic(w, r, ctype, body)
}

// reference serves the API's contract without authentication, like the
// dashboard: GET /openapi.json, the OpenAPI document, and GET /docs, the
// reference page rendered from it (package api).
func (g *Ingress) reference(w http.ResponseWriter, r *http.Request) {
	doc, ctype := api.JSON, "application/json"
	if r.URL.Path == "/docs" {
		doc, ctype = api.Page, "text/html; charset=utf-8"
	}
	body, err := doc()
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	writeStatic(w, r, ctype, body)
}

// isReferencePath says whether p is one of the reference's paths.
func isReferencePath(p string) bool { return p == "/openapi.json" || p == "/docs" }

// writeStatic answers a static page or asset under the dashboard's CSP.
func writeStatic(w http.ResponseWriter, r *http.Request, ctype string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "public, max-age=60")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
