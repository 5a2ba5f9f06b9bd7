CREATE INDEX scores_by_points ON scores (points DESC);
