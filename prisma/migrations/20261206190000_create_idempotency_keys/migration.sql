-- Idempotency keys of creates (session.create, invite.create): `<actor>:<key>`, unique per tenant.
-- AlterTable
ALTER TABLE "sessions" ADD COLUMN     "create_key" TEXT;

-- AlterTable
ALTER TABLE "invite_links" ADD COLUMN     "create_key" TEXT;

-- CreateIndex
CREATE UNIQUE INDEX "sessions_tenant_id_create_key_key" ON "sessions"("tenant_id", "create_key");

-- CreateIndex
CREATE UNIQUE INDEX "invite_links_tenant_id_create_key_key" ON "invite_links"("tenant_id", "create_key");
