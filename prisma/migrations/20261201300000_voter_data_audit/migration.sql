-- A voter's export and erasure (issue 30): every one is recorded here (who, when, what), with the key hashed,
-- never in clear. An erasure's tombstone is unique: a receipt of a heart whose username is a tombstone answers
-- "erased" (services/hearts/get-receipt.ts reads it through the unique index).
-- CreateTable
CREATE TABLE "voter_data_audit" (
    "id" UUID NOT NULL DEFAULT uuid_v7(),
    "action" TEXT NOT NULL,
    "principal" TEXT NOT NULL,
    "server_id" UUID,
    "key_kind" TEXT NOT NULL,
    "key_hash" TEXT NOT NULL,
    "tombstone" TEXT,
    "counts" JSONB NOT NULL DEFAULT '{}',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "voter_data_audit_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "voter_data_audit_tombstone_key" ON "voter_data_audit"("tombstone");

-- CreateIndex
CREATE INDEX "voter_data_audit_created_at_idx" ON "voter_data_audit"("created_at");
