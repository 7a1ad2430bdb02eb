-- AlterTable
ALTER TABLE "servers" ADD COLUMN     "public_key_signatures" BOOLEAN NOT NULL DEFAULT false;

-- CreateTable
CREATE TABLE "webhook_signing_keys" (
    "kid" TEXT NOT NULL,
    "public_key" TEXT NOT NULL,
    "private_key" TEXT NOT NULL,
    "current" BOOLEAN,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "retired_at" TIMESTAMPTZ(3),
    "expires_at" TIMESTAMPTZ(3),

    CONSTRAINT "webhook_signing_keys_pkey" PRIMARY KEY ("kid")
);

-- CreateIndex
CREATE UNIQUE INDEX "webhook_signing_keys_current_key" ON "webhook_signing_keys"("current");
