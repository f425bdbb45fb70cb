-- Team workers made by the AgentCreate tool remember the leader session that created them, so deleting
-- that session deletes them too. Deliberately not a foreign key (see prisma/agent.prisma).

-- AlterTable
ALTER TABLE "agents" ADD COLUMN "created_by_leader_session_id" TEXT;

-- CreateIndex
CREATE INDEX "agents_tenant_id_created_by_leader_session_id_idx" ON "agents"("tenant_id", "created_by_leader_session_id");
