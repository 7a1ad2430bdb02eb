-- Time-ordered ids (uuid version 7, RFC 9562: 48 bits of Unix milliseconds, then 74 random bits) for rows the
-- database names itself (the consumer's deliveries). A random (version 4) key lands each insert on a random leaf of
-- the primary-key index: once the index outgrows the cache, every insert reads a leaf and, after each checkpoint,
-- writes its full page to the WAL. A time-ordered key appends at the index's right edge. The application makes the
-- same ids for the rows it names (services/shared/values/ids.ts, timeOrderedId). The version-4 uuid's random bits
-- are kept; its first 6 bytes become the time and its version nibble 0100 becomes 0111 (bits 52 and 53 set).
CREATE FUNCTION uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid()) PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;
