-- Idempotency keys of the remaining creates (agent.create, operations.createWebhook, apiKey.create,
-- library.create: `<actor>:<key>` unique per tenant; operator.tenants.create: `operator_<id>:<key>`, unique).
-- AlterTable
ALTER TABLE "agents" ADD COLUMN     "create_key" TEXT;

-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "create_key" TEXT;

-- AlterTable
ALTER TABLE "library_entries" ADD COLUMN     "create_key" TEXT;

-- AlterTable
ALTER TABLE "tenants" ADD COLUMN     "create_key" TEXT;

-- AlterTable
ALTER TABLE "webhook_endpoints" ADD COLUMN     "create_key" TEXT;

-- CreateIndex
CREATE UNIQUE INDEX "agents_tenant_id_create_key_key" ON "agents"("tenant_id", "create_key");

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_tenant_id_create_key_key" ON "api_keys"("tenant_id", "create_key");

-- CreateIndex
CREATE UNIQUE INDEX "library_entries_tenant_id_create_key_key" ON "library_entries"("tenant_id", "create_key");

-- CreateIndex
CREATE UNIQUE INDEX "tenants_create_key_key" ON "tenants"("create_key");

-- CreateIndex
CREATE UNIQUE INDEX "webhook_endpoints_tenant_id_create_key_key" ON "webhook_endpoints"("tenant_id", "create_key");
