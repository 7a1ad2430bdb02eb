-- CreateIndex
CREATE INDEX "hearts_server_id_created_at_id_idx" ON "hearts"("server_id", "created_at", "id");
