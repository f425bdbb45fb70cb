-- Issue 12 (dashboard): an agent's system prompt apart from its description, the tenant's defaults (isolation
-- policy of agents that name none, workspace idle TTL) on the tenant policy, and the tenant library of MCP
-- declarations and skills.

-- CreateEnum
CREATE TYPE "LibraryEntryKind" AS ENUM ('MCP', 'SKILL');

-- AlterTable
ALTER TABLE "agents" ADD COLUMN     "system_prompt" TEXT NOT NULL DEFAULT '';

-- AlterTable
ALTER TABLE "tenants" ADD COLUMN     "default_isolation_policy" "IsolationPolicy",
ADD COLUMN     "workspace_idle_ttl_ms" INTEGER;

-- CreateTable
CREATE TABLE "library_entries" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "kind" "LibraryEntryKind" NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "content" JSONB NOT NULL,
    "created_by_user_id" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "library_entries_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "library_entries_tenant_id_created_at_idx" ON "library_entries"("tenant_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "library_entries_tenant_id_kind_name_key" ON "library_entries"("tenant_id", "kind", "name");

-- AddForeignKey
ALTER TABLE "library_entries" ADD CONSTRAINT "library_entries_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;


-- Backfill: the chat used to send "You are <name>, an AI agent working in a persistent workspace." followed by
-- the trimmed description on its own line. An agent with a description gets exactly that text as its system
-- prompt, so its next turn sees the same prompt; an empty system prompt means the first sentence alone (what an
-- agent without a description got), so those rows stay ''.
UPDATE "agents"
SET "system_prompt" = 'You are ' || "name" || ', an AI agent working in a persistent workspace.' || E'\n' ||
  regexp_replace("description", '^\s+|\s+$', '', 'g')
WHERE regexp_replace("description", '^\s+|\s+$', '', 'g') <> '';
