-- AlterTable
ALTER TABLE "tenant_quotas" ADD COLUMN     "warm_claims_per_minute" INTEGER;
