-- CreateEnum
CREATE TYPE "UsageKind" AS ENUM ('workspace_seconds', 'provision', 'turn', 'input_tokens', 'output_tokens', 'tool_call');

-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "metered_at" TIMESTAMP(3),
ADD COLUMN     "metered_size" TEXT;

-- CreateTable
CREATE TABLE "tenant_quotas" (
    "tenant_id" TEXT NOT NULL,
    "live_workspaces" INTEGER,
    "total_workspaces" INTEGER,
    "concurrent_turns" INTEGER,
    "provisions_per_minute" INTEGER,
    "workspace_cpus" DOUBLE PRECISION,
    "workspace_memory_bytes" BIGINT,
    "workspace_disk_bytes" BIGINT,
    "mcp_servers_per_scope" INTEGER,
    "skill_storage_bytes" BIGINT,
    "monthly_budget_units" DOUBLE PRECISION,
    "budget_alert_percents" INTEGER[] DEFAULT ARRAY[]::INTEGER[],
    "budget_hard_stop" BOOLEAN NOT NULL DEFAULT false,
    "budget_stop_workspaces" BOOLEAN NOT NULL DEFAULT false,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "tenant_quotas_pkey" PRIMARY KEY ("tenant_id")
);

-- CreateTable
CREATE TABLE "usage_records" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "kind" "UsageKind" NOT NULL,
    "quantity" DOUBLE PRECISION NOT NULL,
    "backend" TEXT,
    "size" TEXT,
    "agent_id" TEXT,
    "session_id" TEXT,
    "user_id" TEXT,
    "workspace_id" TEXT,
    "at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "usage_records_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "budget_alerts" (
    "tenant_id" TEXT NOT NULL,
    "month" TEXT NOT NULL,
    "percent" INTEGER NOT NULL,
    "spent_units" DOUBLE PRECISION NOT NULL,
    "budget_units" DOUBLE PRECISION NOT NULL,
    "at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "budget_alerts_pkey" PRIMARY KEY ("tenant_id","month","percent")
);

-- CreateIndex
CREATE INDEX "usage_records_tenant_id_at_idx" ON "usage_records"("tenant_id", "at");

-- CreateIndex
CREATE INDEX "usage_records_tenant_id_kind_at_idx" ON "usage_records"("tenant_id", "kind", "at");

-- AddForeignKey
ALTER TABLE "tenant_quotas" ADD CONSTRAINT "tenant_quotas_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "usage_records" ADD CONSTRAINT "usage_records_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "budget_alerts" ADD CONSTRAINT "budget_alerts_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

