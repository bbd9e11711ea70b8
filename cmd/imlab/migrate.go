package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"imlab/ref/schema"
	"imlab/ref/server"
)

// newMigrateCmd: imlab migrate applies the schema migrations not yet
// applied and prints each version it applied.
func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the reference server's schema migrations and print the versions applied",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dsn := fromEnv(cmd.Flags(), "mysql-dsn", envMySQLDSN)
			if dsn == "" {
				return fmt.Errorf("no database: set --mysql-dsn or %s", envMySQLDSN)
			}
			timeout, _ := cmd.Flags().GetDuration("timeout")
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			cfg := server.DefaultConfig().MySQL
			cfg.MaxOpenConns, cfg.MaxIdleConns = 2, 2
			db, err := server.OpenMySQL(ctx, dsn, cfg)
			if err != nil {
				return err
			}
			defer db.Close()
			applied, err := schema.Migrate(ctx, db)
			for _, v := range applied {
				fmt.Fprintln(cmd.OutOrStdout(), "applied", v)
			}
			if err != nil {
				return err
			}
			all, err := schema.Migrations()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema up to date: %d migrations, %d applied now\n", len(all), len(applied))
			return nil
		},
	}
	cmd.Flags().String("mysql-dsn", "", "go-sql-driver DSN with a database (default $"+envMySQLDSN+")")
	cmd.Flags().Duration("timeout", 2*time.Minute, "bound on the whole migration")
	return cmd
}
