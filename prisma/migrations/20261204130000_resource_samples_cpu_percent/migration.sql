-- AlterTable
ALTER TABLE "resource_samples" ADD COLUMN "cpu_percent" DOUBLE PRECISION;
