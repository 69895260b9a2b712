package opensearch

import (
	"embed"
	"fmt"
	"strconv"

	json "github.com/go-json-experiment/json/v1"

	"github.com/agentbus/agentbus/store"
)

// mappingFS holds the index mappings of seed 000 (§4.4, §5.1, §9), one file
// per index, all "dynamic": "strict". The configurable parts of the
// embedding field (dimension, k-NN method) are filled in by Mapping.
//
//go:embed mappings/*.json
var mappingFS embed.FS

// obj is a JSON object under construction.
type obj = map[string]any

// Mapping returns the mapping of index (one of store.Indexes()) for cfg:
// the seed's mapping with "dynamic": "strict" and, for agent_memory, the
// embedding field as a knn_vector of cfg.Dimension dimensions indexed with
// HNSW on cfg.Engine with cosine similarity.
func Mapping(index string, cfg Config) (map[string]any, error) {
	cfg = cfg.withDefaults()
	raw, err := mappingFS.ReadFile("mappings/" + index + ".json")
	if err != nil {
		return nil, fmt.Errorf("opensearch: %w: %q", store.ErrUnknownIndex, index)
	}
	var m obj
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("opensearch: mapping %s: %w", index, err)
	}
	if index == store.IndexMemory {
		props := m["properties"].(obj)
		props["embedding"] = obj{
			"type":      "knn_vector",
			"dimension": cfg.Dimension,
			"method": obj{
				"name":       "hnsw",
				"engine":     cfg.Engine,
				"space_type": "cosinesimil",
			},
		}
	}
	return m, nil
}

// indexSettings returns the settings of index for cfg. withRollover adds
// the ISM rollover alias setting (agent_events with ISM only).
func indexSettings(index string, cfg Config, rolloverAlias string) obj {
	s := obj{"number_of_shards": cfg.Shards}
	if cfg.Replicas > 0 {
		s["number_of_replicas"] = cfg.Replicas
	} else {
		s["number_of_replicas"] = 0
		s["auto_expand_replicas"] = "0-1"
	}
	if cfg.RefreshInterval > 0 {
		s["refresh_interval"] = strconv.FormatInt(cfg.RefreshInterval.Milliseconds(), 10) + "ms"
	}
	if index == store.IndexMemory {
		s["knn"] = true
	}
	if rolloverAlias != "" {
		s["plugins.index_state_management.rollover_alias"] = rolloverAlias
	}
	return obj{"index": s}
}
