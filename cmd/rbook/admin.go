package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rbookhq/rbook-action/controlplane/embedded"
	"github.com/rbookhq/rbook-action/controlplane/store"
)

// defaultAdminDB is the database the admin commands use without --db: rbook serve's default.
const defaultAdminDB = ".rbook/controlplane.db"

// newAdminCmd is `rbook admin`: the operator's commands for a control plane: its health
// (docs/deploy.md) and its database (docs/backup.md): backup, restore, migrate.
func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operate a control plane: its health, database backup, restore, migrate",
		Long: `Commands for the operator of a control plane (rbook serve): its health as a container's
health check asks it (docs/deploy.md), an online backup of its SQLite database, a checked
restore, and its schema migrations. PostgreSQL databases are backed up with pg_dump and
restored with pg_restore. See docs/backup.md.

Exit codes: each subcommand's --help lists its own; 'rbook admin' alone prints this help
and exits 0, an unknown subcommand exits 2.`,
		Example: `  rbook admin health                   # 127.0.0.1:7070, as a container's health check does
  rbook admin backup /var/backups/rbook/cp.db --db /var/lib/rbook/controlplane.db
  rbook admin restore /var/backups/rbook/cp.db --db /var/lib/rbook/controlplane.db
  rbook admin migrate --dry-run --db postgres://rbook@db:5432/rbook`,
	}
	cmd.AddCommand(newAdminHealthCmd(), newAdminBackupCmd(), newAdminRestoreCmd(), newAdminMigrateCmd())
	return cmd
}

func newAdminBackupCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the SQLite database to FILE while the control plane keeps serving",
		Long: `Write a consistent copy of the control plane's SQLite database (--db) to FILE, while
rbook serve keeps running on it: SQLite's VACUUM INTO on a read connection of its own copies
one committed snapshot (every transition acknowledged before the backup started is in it).
The copy is then opened and checked (PRAGMA integrity_check, an rbook schema this binary
knows) before the command reports success. FILE must not exist: a backup never replaces a
file. A PostgreSQL --db is refused: back it up with pg_dump (docs/backup.md, "PostgreSQL").

Exit codes:
  0  FILE written and checked
  2  refused (FILE exists, PostgreSQL, no database) or the copy failed its check`,
		Example: `  rbook admin backup /var/backups/rbook/cp-$(date +%F).db --db /var/lib/rbook/controlplane.db`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			info, err := store.BackupSQLite(cmd.Context(), db, args[0])
			if errors.Is(err, store.ErrPostgresBackup) {
				return abort("rbook admin backup: --db %s is PostgreSQL: %v", store.RedactDSN(db), err)
			}
			if err != nil {
				return abort("rbook admin backup: %v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup %s written and checked in %s: schema version %d, %d runs, %d transitions\n",
				args[0], time.Since(start).Round(time.Millisecond), info.SchemaVersion, info.Runs, info.Transitions)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", defaultAdminDB, "the control plane's SQLite database file")
	return cmd
}

func newAdminRestoreCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "restore BACKUP --db FILE",
		Short: "Replace the SQLite database with a checked backup",
		Long: `Replace the control plane's SQLite database (--db FILE) with BACKUP, a file written by
rbook admin backup. BACKUP is checked first (PRAGMA integrity_check, an rbook database, a
schema not newer than this binary's) and nothing is replaced when a check fails. The
restore refuses while a control plane serves FILE (stop rbook serve first) and holds FILE's
serving lock while it works, so none starts meanwhile. The current FILE is kept as
FILE.before-restore; BACKUP is copied beside FILE, fsynced and renamed over it, so a crash
leaves either database whole. A backup with an older schema is migrated by the next start.

Exit codes:
  0  restored
  2  refused (a check failed, a control plane serves FILE, PostgreSQL) or the copy failed`,
		Example: `  systemctl stop rbook
  rbook admin restore /var/backups/rbook/cp-2026-05-01.db --db /var/lib/rbook/controlplane.db
  systemctl start rbook`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("db") {
				return &usageError{cmd, errors.New("--db FILE is required: the database to replace")}
			}
			if store.IsPostgresDSN(db) {
				return abort("rbook admin restore: --db %s is PostgreSQL: %v", store.RedactDSN(db), store.ErrPostgresBackup)
			}
			// Checked before the lock, so a bad backup is reported even while a server runs.
			if _, err := store.CheckBackup(cmd.Context(), args[0]); err != nil {
				return abort("rbook admin restore: the backup was not restored: %v", err)
			}
			unlock, err := embedded.LockDB(db, time.Second)
			if served := (*embedded.ServedError)(nil); errors.As(err, &served) {
				return abort("rbook admin restore: nothing was replaced: another control plane is serving %s (an 'rbook serve', or the embedded one of a running 'rbook run'). "+
					"Stop it (systemctl stop rbook, or end that run), run this restore again, then start it: it serves the restored database (docs/backup.md, \"SQLite: restore\")", db)
			} else if err != nil {
				return abort("rbook admin restore: nothing was replaced: %v", err)
			}
			defer unlock()
			info, err := store.RestoreSQLite(cmd.Context(), args[0], db)
			if err != nil {
				return abort("rbook admin restore: %v", err)
			}
			kept := "; no database was there, so nothing was replaced: check that --db is the file rbook serve serves"
			if info.Kept {
				kept = "; the previous database is kept as " + db + ".before-restore"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s: schema version %d, %d runs, %d transitions%s\n",
				args[0], db, info.SchemaVersion, info.Runs, info.Transitions, kept)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "the SQLite database file to replace, the one rbook serve --db serves (required)")
	return cmd
}

func newAdminMigrateCmd() *cobra.Command {
	var (
		db     string
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "migrate [--dry-run]",
		Short: "Apply (or with --dry-run list) the database's pending schema migrations",
		Long: `Apply the schema migrations this rbook has and the database (--db: SQLite file or
PostgreSQL DSN) lacks, as rbook serve does when it starts; with --dry-run, list them (version
and name) and change nothing. Migrations are additive, so control planes of the previous
release keep serving a migrated database during a rolling upgrade; a database migrated by a
newer rbook is refused (docs/backup.md, "Upgrades and migrations").

Exit codes:
  0  listed, or applied (possibly nothing)
  2  the database is newer than this rbook, or could not be opened`,
		Example: `  rbook admin migrate --dry-run --db /var/lib/rbook/controlplane.db
  rbook admin migrate --db postgres://rbook@db:5432/rbook`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if !store.IsPostgresDSN(db) {
				// A mistyped path must not become a new, empty database that "migrated".
				if _, err := os.Stat(db); err != nil {
					return abort("rbook admin migrate: --db %s: no database there (%v); give the file rbook serve --db serves", db, err)
				}
			}
			if dryRun {
				version, pending, err := store.PendingMigrations(cmd.Context(), db)
				if err != nil {
					return abort("rbook admin migrate: --db %s: %v", store.RedactDSN(db), err)
				}
				if len(pending) == 0 {
					fmt.Fprintf(out, "schema version %d: no migration pending\n", version)
					return nil
				}
				fmt.Fprintf(out, "schema version %d: %d pending (rbook admin migrate or rbook serve applies them)\n", version, len(pending))
				for _, m := range pending {
					fmt.Fprintf(out, "  %4d  %s\n", m.Version, m.Name)
				}
				return nil
			}
			st, err := store.Open(cmd.Context(), db)
			if err != nil {
				return abort("rbook admin migrate: --db %s: %v", store.RedactDSN(db), err)
			}
			from, to := st.Migrated()
			if err := st.Close(); err != nil {
				return abort("rbook admin migrate: %v", err)
			}
			if from == to {
				fmt.Fprintf(out, "schema version %d: no migration pending\n", to)
			} else {
				fmt.Fprintf(out, "database schema migrated from version %d to %d\n", from, to)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", defaultAdminDB, "the control plane's database: SQLite file or PostgreSQL DSN")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the pending migrations without applying them")
	return cmd
}
