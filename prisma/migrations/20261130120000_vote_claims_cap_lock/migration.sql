-- The claim ledger's per-player cap under concurrent casts (services/claims/write-vote-claims.ts, its only
-- caller, inside CastHeart's one statement). A statement reads one snapshot, taken when it starts: two
-- CastHeart statements for one player that overlap each counted the player's held hearts without the
-- other's new one, and the player was left one over the cap. This function takes a per-player lock
-- (held until the transaction ends) and then counts: being VOLATILE, its statements read a fresh snapshot,
-- taken after the lock, so they see what the previous holder committed. `p_new` are the statement's own new
-- hearts (counted by `p_fresh`, never expired here, whether or not the statement has inserted them yet).
-- Older held hearts past their window are expired ("window"); beyond the cap counting the new ones, the oldest
-- ("cap"). Returns how many it expired.
CREATE FUNCTION "expire_vote_claims"(p_server_id uuid, p_player_key text, p_at timestamptz, p_fresh int, p_max_held int, p_new uuid[])
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  expired integer;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('vote_claims:' || p_server_id::text || ':' || p_player_key, 0));
  WITH due AS (
    SELECT c.heart_id, CASE WHEN c.expires_at <= p_at THEN 'window' ELSE 'cap' END AS reason
    FROM (
      -- newer: the held hearts still in their window, counted from the newest down to this one
      SELECT h.heart_id, h.expires_at,
             count(*) FILTER (WHERE h.expires_at > p_at) OVER (ORDER BY h.counted_at DESC, h.heart_id DESC ROWS UNBOUNDED PRECEDING) AS newer
      FROM vote_claims h
      WHERE h.server_id = p_server_id AND h.player_key = p_player_key AND h.state = 'held' AND h.heart_id <> ALL (p_new)
    ) c
    WHERE c.expires_at <= p_at OR c.newer > p_max_held - p_fresh
  )
  UPDATE vote_claims v SET state = 'expired', expired_reason = due.reason, expired_at = p_at
  FROM due WHERE v.heart_id = due.heart_id AND v.state = 'held';
  GET DIAGNOSTICS expired = ROW_COUNT;
  RETURN expired;
END
$$;
