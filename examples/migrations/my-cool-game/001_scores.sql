-- The game's own schema: applied by tallyd after the database exists,
-- with the game's own credential, and recorded with its checksum.
CREATE TABLE scores (
	player	text NOT NULL,
	points	integer NOT NULL CHECK (points >= 0),
	at	timestamptz NOT NULL DEFAULT now()
);
