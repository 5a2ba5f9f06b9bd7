CREATE TABLE nodes (name text PRIMARY KEY, seen timestamptz);
