-- 0034_books_volume: which volume of a work a book is (its manifest's book.volume, e.g. "II" for
-- Tocqueville's 1840 Démocratie), so a citation names it: « *De la démocratie en Amérique*, II (1840) ».
-- depends: 0033_node_chunk_kind

ALTER TABLE rag.books ADD COLUMN IF NOT EXISTS volume TEXT;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'books_volume_check') THEN
        ALTER TABLE rag.books ADD CONSTRAINT books_volume_check CHECK (volume IS NULL OR btrim(volume) <> '');
    END IF;
END
$$;
COMMENT ON COLUMN rag.books.volume IS
    'Which volume of the work the book is, as a citation names it after the title (manifest book.volume, e.g. ''II''); NULL for a whole work.';
