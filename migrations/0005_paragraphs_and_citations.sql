-- 0005: paragraph numbers and summary citations (issue 11): what a summary sentence's anchors
-- ([§12–14], docs/anchors.md) point to, loaded from the sidecars' `paragraph` and `cites`.
-- depends: 0004_hnsw_settings_without_set_config

ALTER TABLE rag.hierarchical_content_nodes ADD COLUMN IF NOT EXISTS paragraph INT CHECK (paragraph >= 1);
COMMENT ON COLUMN rag.hierarchical_content_nodes.paragraph IS
    '1-based number of the paragraph of source_file this chunk comes from (a long paragraph split in several chunks keeps one number): what summary anchors cite. NULL only for rows loaded before migration 0005 (the next load replaces them).';
CREATE INDEX IF NOT EXISTS hcn_paragraph_idx ON rag.hierarchical_content_nodes (source_file, paragraph);

CREATE TABLE IF NOT EXISTS rag.citations (
    id                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_file        TEXT NOT NULL,
    chunk_index        INT NOT NULL,
    cited_source_file  TEXT NOT NULL CHECK (cited_source_file ~ '^corpus/[^/]+/.+\.md$'),
    cited_paragraph    INT CHECK (cited_paragraph >= 1),
    FOREIGN KEY (source_file, chunk_index)
        REFERENCES rag.hierarchical_content_nodes (source_file, chunk_index) ON DELETE CASCADE,
    CHECK (cited_source_file <> source_file)
);
CREATE UNIQUE INDEX IF NOT EXISTS citations_unique_idx
    ON rag.citations (source_file, chunk_index, cited_source_file, coalesce(cited_paragraph, 0));
CREATE INDEX IF NOT EXISTS citations_cited_idx ON rag.citations (cited_source_file, cited_paragraph);
COMMENT ON TABLE rag.citations IS
    'What each summary chunk cites (its anchors): paragraphs of the section''s source.md for a chapter summary, child summaries for a part or book summary. Loaded with the chunk''s rows by `bookrag load`; deleted with them.';
COMMENT ON COLUMN rag.citations.id IS 'Surrogate key (a replica identity for logical replication, docs/scaling.md).';
COMMENT ON COLUMN rag.citations.source_file IS 'The citing summary (a row of hierarchical_content_nodes with chunk_index).';
COMMENT ON COLUMN rag.citations.chunk_index IS 'The citing chunk of that summary.';
COMMENT ON COLUMN rag.citations.cited_source_file IS 'The cited file: a source.md (with cited_paragraph) or a child summary.md (whole node).';
COMMENT ON COLUMN rag.citations.cited_paragraph IS '1-based paragraph of cited_source_file (hierarchical_content_nodes.paragraph); NULL = the whole node.';

GRANT SELECT ON rag.citations TO bookrag_reader;
