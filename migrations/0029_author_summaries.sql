-- 0029_author_summaries: the author's own summaries (issue 36, decision 0035): the indented run of phrases that
-- opens a chapter or sub-section, kept as a paragraph of its own and marked on its rows.
-- depends: 0028_bm25_mode_lookup

ALTER TABLE rag.hierarchical_content_nodes
    ADD COLUMN IF NOT EXISTS kind TEXT NOT NULL DEFAULT 'text';
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'hcn_kind_check') THEN
        ALTER TABLE rag.hierarchical_content_nodes ADD CONSTRAINT hcn_kind_check
            CHECK (kind IN ('text', 'author_summary') AND (kind = 'text' OR node_type = 'source'));
    END IF;
END
$$;
COMMENT ON COLUMN rag.hierarchical_content_nodes.kind IS
    'What the row''s paragraph is: ''author_summary'' = the author''s own summary of the section (the run of phrases opening a chapter or sub-section, source rows only; the sidecar''s "kind"), ''text'' = anything else (the book''s text, the project''s summaries).';
