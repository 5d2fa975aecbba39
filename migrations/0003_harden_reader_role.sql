-- 0003: the role is the wall (issue 13). No login but the owner may create anything anywhere;
-- bookrag_reader gets exactly USAGE on rag, SELECT on its tables, EXECUTE on the retrieval
-- functions, role-level limits, and no side-effect functions. The MCP server's SQL guard is
-- the second wall, no longer the only one.
-- depends: 0002_functions

-- pg_search leaves schemas pdb and paradedb writable by PUBLIC (and PostgreSQL < 15 did the same
-- with public): a login could plant an overload such as pdb.score(integer) that the owner's next
-- search would resolve to and run with the owner's rights. TEMP would let it create objects too.
DO $$
DECLARE
    v_schema TEXT;
BEGIN
    FOREACH v_schema IN ARRAY ARRAY['public', 'rag', 'pdb', 'paradedb'] LOOP
        IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = v_schema) THEN
            EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', v_schema);
            EXECUTE format('REVOKE ALL ON SCHEMA %I FROM bookrag_reader', v_schema);
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO bookrag_reader', v_schema);
        END IF;
    END LOOP;
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO %I', current_database(), current_user);
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO bookrag_reader', current_database());
END
$$;

-- Side effects a reader has no use for: changing settings (set_config), locks the loader relies on
-- (an advisory lock on its key made every `bookrag load` hang), sleeping, large objects,
-- notifications, signalling other backends, running SQL text (query_to_xml, ts_stat…), snapshot
-- export, transaction ids, sequences, WAL messages, DO blocks. Revoked from PUBLIC (the only way: privileges
-- add up) and granted back to the owner running this migration, which the loader needs. On a
-- server where the owner is not a superuser, pg_catalog's functions cannot be changed: say so.
DO $$
DECLARE
    v_fn REGPROCEDURE;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE (n.nspname = 'pg_catalog' AND (
                  p.proname IN ('set_config', 'pg_sleep', 'pg_sleep_for', 'pg_sleep_until', 'pg_notify',
                                'pg_cancel_backend', 'pg_terminate_backend', 'pg_export_snapshot',
                                'pg_logical_emit_message', 'pg_stat_force_next_flush', 'pg_stat_clear_snapshot',
                                'pg_import_system_collations', 'nextval', 'setval', 'currval', 'lastval',
                                'txid_current', 'txid_current_if_assigned', 'pg_current_xact_id',
                                'pg_current_xact_id_if_assigned', 'query_to_xml', 'query_to_xmlschema',
                                'query_to_xml_and_xmlschema', 'cursor_to_xml', 'cursor_to_xmlschema',
                                'ts_stat', 'ts_rewrite', 'loread', 'lowrite', 'setseed')
                  OR p.proname LIKE 'lo\_%'
                  OR p.proname LIKE 'pg\_advisory%'
                  OR p.proname LIKE 'pg\_try\_advisory%'))
           -- pg_search's maintenance and test helpers (merging, test tables, background workers)
           OR (n.nspname IN ('paradedb', 'pdb') AND p.provolatile = 'v' AND p.prokind IN ('f', 'p')
               AND p.proname NOT LIKE '%\_agg\_%' AND p.proname NOT IN ('agg_fn', 'window_agg'))
    LOOP
        EXECUTE format('REVOKE EXECUTE ON ROUTINE %s FROM PUBLIC', v_fn);
        EXECUTE format('REVOKE EXECUTE ON ROUTINE %s FROM bookrag_reader', v_fn);
        EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %I', v_fn, current_user);
    END LOOP;
    -- DO blocks: nothing a reader needs (function calls do not need the language).
    REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC;
    EXECUTE format('GRANT USAGE ON LANGUAGE plpgsql TO %I', current_user);
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'bookrag: % may not revoke side-effect functions from PUBLIC (%); bookrag_reader keeps them, the MCP server''s SQL guard still refuses them',
        current_user, SQLERRM;
END
$$;

-- Functions in rag: EXECUTE for the reader on the retrieval API, not on the loader's helper.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA rag FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA rag TO bookrag_reader;
REVOKE EXECUTE ON FUNCTION rag._ensure_vector_index(TEXT, INT) FROM bookrag_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA rag REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES IN SCHEMA rag GRANT EXECUTE ON FUNCTIONS TO bookrag_reader;
REVOKE ALL ON ALL TABLES IN SCHEMA rag FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA rag FROM bookrag_reader;
GRANT SELECT ON rag.hierarchical_content_nodes, rag.books, rag.embedding_models, rag.function_versions TO bookrag_reader;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA rag FROM PUBLIC;

-- Limits that hold however the role logs in (the MCP server also sets them per connection).
-- temp_file_limit is a superuser-only setting: skipped, with a warning, where the owner is not one.
ALTER ROLE bookrag_reader CONNECTION LIMIT 24;
ALTER ROLE bookrag_reader SET default_transaction_read_only = on;
ALTER ROLE bookrag_reader SET statement_timeout = '5s';
ALTER ROLE bookrag_reader SET lock_timeout = '2s';
ALTER ROLE bookrag_reader SET idle_in_transaction_session_timeout = '30s';
ALTER ROLE bookrag_reader SET work_mem = '16MB';
DO $$
BEGIN
    ALTER ROLE bookrag_reader SET temp_file_limit = '256MB';
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'bookrag: % may not set temp_file_limit for bookrag_reader (%)', current_user, SQLERRM;
END
$$;
COMMENT ON ROLE bookrag_reader IS
    'bookrag read-only role (MCP server): USAGE on rag, SELECT on its tables, EXECUTE on the retrieval functions; '
    'no CREATE or TEMP anywhere, no side-effect functions; read-only transactions, 5 s statements, 24 connections.';
