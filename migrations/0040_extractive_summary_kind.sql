-- 0040_extractive_summary_kind: the rows of a summary the extractive provider wrote say so (issue 46,
-- decision 0040): kind 'extractive_summary', the author's sentences chosen and arranged by a program,
-- so search hits, nodes and citations tell an agent to quote the paragraphs it cites, never it.
-- depends: 0039_pin_search_path

ALTER TABLE rag.hierarchical_content_nodes DROP CONSTRAINT IF EXISTS hcn_kind_check;
ALTER TABLE rag.hierarchical_content_nodes ADD CONSTRAINT hcn_kind_check
    CHECK (kind IN ('text', 'author_summary', 'extractive_summary')
           AND (kind <> 'author_summary' OR node_type = 'source')
           AND (kind <> 'extractive_summary' OR node_type = 'summary'));
COMMENT ON COLUMN rag.hierarchical_content_nodes.kind IS
    'What the row''s paragraph is: ''author_summary'' = the author''s own summary of the section (the run of phrases opening a chapter or sub-section, source rows only; the sidecar''s "kind"), ''extractive_summary'' = a summary the extractive provider wrote (the author''s sentences chosen and arranged by a program: quote the paragraphs it cites, not it; summary rows only), ''text'' = anything else (the book''s text, the summaries the team or an LLM wrote).';
