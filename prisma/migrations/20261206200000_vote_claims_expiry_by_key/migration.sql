-- expire_vote_claims (migration 20261130120000_vote_claims_cap_lock) takes the rows it expires by primary key.
-- Its UPDATE joined them (`FROM due WHERE v.heart_id = due.heart_id AND v.state = 'held'`), and `v.state = 'held'`
-- implies vote_claims_held_player_idx's predicate: when the player's rows looked many to the planner (a player key
-- common in the ledger's statistics), it hash-joined the due rows against a scan of that whole partial index, i.e.
-- every held row of every server of the list (5,003 entries read for one held heart in
-- test/integration/claims-bounded-reads.test.ts on a list of 5,000 servers). The UPDATE now names its rows as an
-- array of their primary keys, which the planner probes one by one (the array is at most the player's held rows, the
-- per-player cap plus the hearts past their window), and recomputes the reason from the row itself: the same rows, the
-- same reasons, the same count.
CREATE OR REPLACE FUNCTION "expire_vote_claims"(p_server_id uuid, p_player_key text, p_at timestamptz, p_fresh int, p_max_held int, p_new uuid[])
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  expired integer;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('vote_claims:' || p_server_id::text || ':' || p_player_key, 0));
  -- Bounded: the player's held rows on the server (vote_claims_held_player_idx), then those due by primary key.
  UPDATE vote_claims v
  SET state = 'expired', expired_reason = CASE WHEN v.expires_at <= p_at THEN 'window' ELSE 'cap' END, expired_at = p_at
  WHERE v.heart_id = ANY (ARRAY(
      SELECT c.heart_id
      FROM (
        -- newer: the held hearts still in their window, counted from the newest down to this one
        SELECT h.heart_id, h.expires_at,
               count(*) FILTER (WHERE h.expires_at > p_at) OVER (ORDER BY h.counted_at DESC, h.heart_id DESC ROWS UNBOUNDED PRECEDING) AS newer
        FROM vote_claims h
        WHERE h.server_id = p_server_id AND h.player_key = p_player_key AND h.state = 'held' AND h.heart_id <> ALL (p_new)
      ) c
      WHERE c.expires_at <= p_at OR c.newer > p_max_held - p_fresh
    ))
    AND v.state = 'held';
  GET DIAGNOSTICS expired = ROW_COUNT;
  RETURN expired;
END
$$;
