-- Tenant policy for who may declare stdio MCP servers (owner/admin by default), and the key that minted an
-- API key (revoking a key revokes the keys it minted). Not a foreign key: rows stay for the audit trail.

-- AlterTable
ALTER TABLE "tenants" ADD COLUMN "stdio_mcp_min_role" "MembershipRole" NOT NULL DEFAULT 'admin';

-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN "minted_by_api_key_id" TEXT;

-- CreateIndex
CREATE INDEX "api_keys_minted_by_api_key_id_idx" ON "api_keys"("minted_by_api_key_id");
