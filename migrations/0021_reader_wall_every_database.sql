-- 0021: the reader kept out of the postgres and template1 databases, and a role of the MCP server's own.
-- depends: 0020_default_search_static

-- The reader may connect to the corpus database only. PostgreSQL gives PUBLIC the CONNECT right on
-- every database; in the maintenance database (postgres) and template1 a login could create temp
-- tables and functions and run DO blocks, none of which migration 0003's revokes reach. Revoked
-- from PUBLIC there (superusers and the databases' owners keep it). On a shared server whose owner
-- may not do this (PostgreSQL then revokes nothing and only warns), a WARNING says so: those
-- databases stay open to the role.
DO $$
DECLARE
    v_db TEXT;
BEGIN
    FOR v_db IN SELECT datname FROM pg_database
                WHERE datname IN ('postgres', 'template1') AND datname <> current_database() LOOP
        EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', v_db);
        EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM bookrag_reader', v_db);
        IF has_database_privilege('bookrag_reader', v_db, 'CONNECT') THEN
            RAISE WARNING 'bookrag: % may not revoke CONNECT on database % from PUBLIC; bookrag_reader can still log in there',
                current_user, v_db;
        END IF;
    END LOOP;
END
$$;

-- The MCP server logs in as bookrag_mcp: the reader's rights (a member of bookrag_reader), the
-- same limits, and a connection budget of its own, so direct logins of bookrag_reader holding all
-- of theirs cannot starve the server's pool (8 connections).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bookrag_mcp') THEN
        CREATE ROLE bookrag_mcp LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT;
    END IF;
END
$$;
GRANT bookrag_reader TO bookrag_mcp;
ALTER ROLE bookrag_mcp CONNECTION LIMIT 12;
ALTER ROLE bookrag_mcp SET default_transaction_read_only = on;
ALTER ROLE bookrag_mcp SET statement_timeout = '10s';
ALTER ROLE bookrag_mcp SET lock_timeout = '2s';
ALTER ROLE bookrag_mcp SET idle_in_transaction_session_timeout = '30s';
ALTER ROLE bookrag_mcp SET work_mem = '16MB';
DO $$
BEGIN
    ALTER ROLE bookrag_mcp SET temp_file_limit = '256MB';
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'bookrag: % may not set temp_file_limit for bookrag_mcp (%)', current_user, SQLERRM;
END
$$;
COMMENT ON ROLE bookrag_mcp IS
    'bookrag MCP server role: a member of bookrag_reader (the same rights and no more), 12 connections of its own.';
