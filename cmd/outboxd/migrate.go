package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/outboxd/outboxd/internal/cliconfig"
	"github.com/outboxd/outboxd/migrations"
	"github.com/outboxd/outboxd/relay"
)

func newMigrateCommand() *cobra.Command {
	pgURL := defaultRunConfig().PGURL
	var role migrations.Role
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create the outbox table and publication (embedded, versioned, idempotent SQL)",
		Long: `Apply the SQL migrations embedded in outboxd: the table public.outbox and the
publication "outboxd" for its INSERTs. Applied versions are recorded in the
table outboxd_schema_migrations, so running migrate again changes nothing.

Given --role=NAME it also creates (or updates) the role NAME that outboxd
should run as, with only what outboxd needs: LOGIN REPLICATION, USAGE on
schema public and SELECT on public.outbox. No superuser, no CREATE, no write
access. Unless --role-password=... (better: OUTBOXD_ROLE_PASSWORD) is given,
the role's password is left alone: set it yourself (psql's \password NAME
sends only a hash), and allow the role replication connections in
pg_hba.conf. The migrating user must be allowed to create roles (superuser,
or CREATEROLE with REPLICATION) and to grant on the table (its owner).`,
		Args:    cobra.NoArgs,
		PreRunE: cliconfig.Apply,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := relay.ConnectPostgres(cmd.Context(), pgURL)
			if err != nil {
				return err
			}
			defer conn.Close(cmd.Context())
			level, err := relay.ReadWALLevel(cmd.Context(), conn)
			if err != nil {
				return err
			}
			if problem := relay.WALLevelProblem(level); problem != "" {
				// The schema does not need it, so migrate goes on: the
				// warning is for the outboxd run that follows.
				fmt.Fprintln(cmd.ErrOrStderr(), "outboxd: warning:", problem)
			}
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
			if role.Name == "" {
				if role.Password != "" {
					return fmt.Errorf("--role-password needs --role")
				}
				return nil
			}
			if err := migrations.EnsureRole(cmd.Context(), conn, role); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "role %s may log in, replicate and read %s\n", role.Name, migrations.OutboxTable.Sanitize())
			return nil
		},
	}
	cmd.Flags().StringVar(&pgURL, "pg-url", pgURL, "PostgreSQL URL of the database to migrate")
	cmd.Flags().StringVar(&role.Name, "role", "", "create or update this least-privileged role for outboxd run (LOGIN REPLICATION, SELECT on public.outbox)")
	cmd.Flags().StringVar(&role.Password, "role-password", "", "set this password (or SCRAM verifier) on --role; default: leave the password to the operator")
	cliconfig.AddConfigFlag(cmd.Flags())
	cliconfig.DocumentEnv(cmd.Flags())
	return cmd
}
