-- backfillctl's store on PostgreSQL with two roles (docs/least-privilege.md, "The store's database roles").
--
--   backfillctl_migrator    owns the schema and its tables: `backfillctl store migrate` runs as it (DDL).
--   backfillctl_reconciler  reconcile, stop, store unlock, audit adopt-key and rotate-key, and the read-only commands:
--                           SELECT and INSERT on audit_events, rows of the other tables, no DDL.
--
-- Run once, as a superuser (or a role with CREATEROLE that owns the database), connected to the store's database:
--   createdb backfillctl && psql -v ON_ERROR_STOP=1 -d backfillctl -f docs/store-roles.sql
-- Then give each role a password (ALTER ROLE backfillctl_migrator PASSWORD '…') or your own authentication, and run
-- `backfillctl store migrate` with the migrator's URL before the first reconcile and after each upgrade.
-- (tests/adapters/store/test_store_roles.py runs this file, with other role names, against a throw-away database.)

CREATE ROLE backfillctl_migrator LOGIN;
CREATE ROLE backfillctl_reconciler LOGIN;

-- the store lives in a schema of its own, found through each role's search_path
CREATE SCHEMA backfillctl AUTHORIZATION backfillctl_migrator;
ALTER ROLE backfillctl_migrator SET search_path = backfillctl;
ALTER ROLE backfillctl_reconciler SET search_path = backfillctl;
REVOKE ALL ON SCHEMA backfillctl FROM PUBLIC;
GRANT USAGE ON SCHEMA backfillctl TO backfillctl_reconciler;

-- no DDL anywhere else in this database either: before PostgreSQL 15 every role may create tables in `public`, and
-- every role may create temporary tables
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
DO $$
BEGIN
    EXECUTE format('REVOKE CREATE, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO backfillctl_migrator, backfillctl_reconciler', current_database());
END
$$;

-- what the migrator's tables give the reconciler, now and after every `store migrate`: rows, never tables. On
-- audit_events the schema takes UPDATE, DELETE and TRUNCATE back itself (revision 0009 revokes them, and its trigger
-- refuses them to every role but the owner, whatever is granted later)
ALTER DEFAULT PRIVILEGES FOR ROLE backfillctl_migrator IN SCHEMA backfillctl
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO backfillctl_reconciler;
ALTER DEFAULT PRIVILEGES FOR ROLE backfillctl_migrator IN SCHEMA backfillctl
    GRANT USAGE, SELECT ON SEQUENCES TO backfillctl_reconciler;
