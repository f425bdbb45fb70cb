-- AlterTable
ALTER TABLE "checkpoint_restores" ADD COLUMN     "to_write" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "to_write_bytes" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "written_bytes" BIGINT NOT NULL DEFAULT 0;
