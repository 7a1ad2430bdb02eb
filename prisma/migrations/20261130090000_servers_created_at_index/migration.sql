-- ListServerIds pages the servers on (created_at, id): the gateway's list of the server ids that exist.
CREATE INDEX "servers_created_at_id_idx" ON "servers"("created_at", "id");
