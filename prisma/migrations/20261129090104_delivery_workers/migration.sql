-- Dispatcher liveness (issue 27): each running dispatcher beats in delivery_workers; a lease whose holder
-- (deliveries.leased_by) stopped beating is taken over before lease_until, so a delivery process killed
-- mid-send holds its deliveries (and a pay-once heart's reservation) for about WORKER_DEAD_AFTER_MS, not the full lease.
-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "leased_by" UUID;

-- CreateTable
CREATE TABLE "delivery_workers" (
    "id" UUID NOT NULL,
    "started_at" TIMESTAMPTZ(3) NOT NULL,
    "heartbeat_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "delivery_workers_pkey" PRIMARY KEY ("id")
);
