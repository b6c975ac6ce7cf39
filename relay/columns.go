package relay

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/decoder"
	"github.com/outboxd/outboxd/replication"
)

// checkColumns is the preflight check of the outbox table's columns, from
// the catalog, before the first Relation message: --columns by the
// decoder's rules (a *decoder.SchemaError naming the column, its type and
// what the field accepts), then every --subject placeholder, which must
// name a column or a mapped field, then that no column outboxd reads is a
// generated one the stream leaves out. Each would otherwise stop outboxd
// only at the first row.
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
	return c.checkGenerated(have)
}

// checkGenerated refuses a mapped or placeholder column that is generated
// and that pgoutput will not send (replication.Column.Unsent): PostgreSQL
// 15-17 never send generated columns, so the first row would lack it and
// stop outboxd with a column that seems not to exist.
func (c Config) checkGenerated(have []replication.Column) error {
	for _, col := range have {
		if col.Unsent == "" {
			continue
		}
		var reads []string
		for _, f := range decoder.FieldNames {
			if mapped, ok := c.Columns.Mapped(f); ok && mapped == col.Name {
				reads = append(reads, "--columns "+f+"="+col.Name)
			}
		}
		// A placeholder naming a column the stream leaves out reads the
		// field of that name instead, when one is mapped.
		if _, field := c.Columns.Mapped(col.Name); !field && slices.Contains(c.Subject.Columns(), col.Name) {
			reads = append(reads, fmt.Sprintf("--subject placeholder {%s}", col.Name))
		}
		if len(reads) == 0 {
			continue // not read: the stream may leave it out
		}
		kind := "a generated column"
		if col.Generated == 'v' {
			kind = "a virtual generated column"
		}
		return &replication.PreflightError{
			Object: fmt.Sprintf("column %q of table %s", col.Name, c.Table),
			Problem: fmt.Sprintf("is %s, which outboxd reads (%s) but the replication stream does not carry: %s",
				kind, strings.Join(reads, ", "), col.Unsent),
			Fix: fmt.Sprintf("read a plain column instead, filled by the writer or by a BEFORE INSERT trigger; or, on PostgreSQL 18 with a STORED generated column, ALTER PUBLICATION %s SET (publish_generated_columns = stored)",
				pgx.Identifier{c.Publication}.Sanitize()),
		}
	}
	return nil
}
