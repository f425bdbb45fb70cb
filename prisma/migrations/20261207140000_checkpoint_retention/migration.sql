-- AlterTable
ALTER TABLE "tenants" ADD COLUMN     "checkpoint_keep_days" INTEGER,
ADD COLUMN     "checkpoint_keep_turns" INTEGER,
ADD COLUMN     "checkpoint_storage_bytes" BIGINT;
