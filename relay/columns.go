package relay

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/replication"
)

// checkColumns is the preflight check of the outbox table's columns, from
// the catalog, before the first Relation message: --columns by the
// decoder's rules (a *decoder.SchemaError naming the column, its type and
// what the field accepts), then every --subject placeholder, which must
// name a column or a mapped field. Both would otherwise stop outboxd only
// at the first row.
func (c Config) checkColumns(have []replication.Column) error {
	cols := make([]decoder.TableColumn, len(have))
	names := make([]string, len(have))
	for i, col := range have {
		cols[i] = decoder.TableColumn{Name: col.Name, Type: col.Type}
		names[i] = strconv.Quote(col.Name)
	}
	if err := c.Columns.CheckTable(c.Table.String(), cols); err != nil {
		return fmt.Errorf("--columns: %w", err)
	}
	for _, p := range c.Subject.Columns() {
		if slices.ContainsFunc(have, func(col replication.Column) bool { return col.Name == p }) {
			continue
		}
		if _, mapped := c.Columns.Mapped(p); mapped {
			continue
		}
		problem := fmt.Sprintf("has placeholder {%s}, which is no column of table %s (it has %s)", p, c.Table, strings.Join(names, ", "))
		if slices.Contains(decoder.FieldNames, p) {
			problem += " and a field --columns does not map"
		}
		return &replication.PreflightError{
			Object:  fmt.Sprintf("--subject %q", c.Subject),
			Problem: problem,
			Fix:     "name one of its columns in the placeholder (exact case, e.g. {Topic}), or map the field in --columns",
		}
	}
	return nil
}
