-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "purge_held_until" TIMESTAMP(3),
ADD COLUMN     "purge_holder" TEXT,
ADD COLUMN     "purge_inventory" JSONB;
