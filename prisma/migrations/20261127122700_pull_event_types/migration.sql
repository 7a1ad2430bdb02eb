-- AlterTable
ALTER TABLE "servers" ADD COLUMN     "pull_event_types" TEXT[] DEFAULT ARRAY['heart.counted']::TEXT[];
