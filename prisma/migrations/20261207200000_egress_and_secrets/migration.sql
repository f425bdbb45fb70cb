-- CreateEnum
CREATE TYPE "EgressMode" AS ENUM ('off', 'allowlist', 'open');

-- CreateTable
CREATE TABLE "egress_policies" (
    "tenant_id" TEXT NOT NULL,
    "agent_key" TEXT NOT NULL,
    "agent_id" TEXT,
    "mode" "EgressMode" NOT NULL DEFAULT 'off',
    "allow" JSONB NOT NULL DEFAULT '[]',
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "egress_policies_pkey" PRIMARY KEY ("tenant_id","agent_key")
);

-- CreateTable
CREATE TABLE "egress_secrets" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "agent_key" TEXT NOT NULL,
    "agent_id" TEXT,
    "name" TEXT NOT NULL,
    "value_sealed" TEXT NOT NULL,
    "hint" TEXT NOT NULL,
    "hosts" JSONB NOT NULL DEFAULT '[]',
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "egress_secrets_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "workspace_egress_stats" (
    "workspace_id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "refused_count" INTEGER NOT NULL DEFAULT 0,
    "last_refused" JSONB NOT NULL DEFAULT '[]',
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "workspace_egress_stats_pkey" PRIMARY KEY ("workspace_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "egress_secrets_tenant_id_agent_key_name_key" ON "egress_secrets"("tenant_id", "agent_key", "name");

-- CreateIndex
CREATE INDEX "workspace_egress_stats_tenant_id_idx" ON "workspace_egress_stats"("tenant_id");

-- AddForeignKey
ALTER TABLE "egress_policies" ADD CONSTRAINT "egress_policies_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "egress_policies" ADD CONSTRAINT "egress_policies_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "egress_secrets" ADD CONSTRAINT "egress_secrets_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "egress_secrets" ADD CONSTRAINT "egress_secrets_agent_id_fkey" FOREIGN KEY ("agent_id") REFERENCES "agents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspace_egress_stats" ADD CONSTRAINT "workspace_egress_stats_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspace_egress_stats" ADD CONSTRAINT "workspace_egress_stats_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;
