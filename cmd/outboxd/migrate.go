package main

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/migrations"
)

func newMigrateCommand() *cobra.Command {
	pgURL := defaultRunConfig().PGURL
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create the outbox table and publication (embedded, versioned, idempotent SQL)",
		Long: `Apply the SQL migrations embedded in outboxd: the table public.outbox and the
publication "outboxd" for its INSERTs. Applied versions are recorded in the
table outboxd_schema_migrations, so running migrate again changes nothing.`,
		Args:    cobra.NoArgs,
		PreRunE: applyEnv,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := pgx.Connect(cmd.Context(), pgURL)
			if err != nil {
				return fmt.Errorf("connect to PostgreSQL (--pg-url): %w", err)
			}
			defer conn.Close(cmd.Context())
			applied, err := migrations.Apply(cmd.Context(), conn)
			for _, name := range applied {
				fmt.Fprintln(cmd.OutOrStdout(), "applied", name)
			}
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "schema is up to date")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pgURL, "pg-url", pgURL, "PostgreSQL URL of the database to migrate")
	documentEnv(cmd.Flags())
	return cmd
}
