-- CreateTable
CREATE TABLE "dead_letters" (
    "id" BIGSERIAL NOT NULL,
    "source" TEXT NOT NULL,
    "code" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "topic" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "type" TEXT,
    "payload" BYTEA NOT NULL,
    "outbox_id" BIGINT,
    "outbox_created_at" TIMESTAMPTZ(3),
    "partition" INTEGER,
    "offset" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "dead_letters_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "dead_letters_outbox_id_key" ON "dead_letters"("outbox_id");

-- CreateIndex
CREATE INDEX "dead_letters_created_at_idx" ON "dead_letters"("created_at");

-- CreateIndex
CREATE UNIQUE INDEX "dead_letters_source_topic_partition_offset_key" ON "dead_letters"("source", "topic", "partition", "offset");
