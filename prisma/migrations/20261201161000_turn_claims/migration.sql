-- One turn per session held in Postgres (chat_turns + sessions.running_turn_id), idempotent sends, and
-- lease owners, so a dead process's turns and leases are found and released (issue 11).
-- CreateEnum
CREATE TYPE "ChatTurnStatus" AS ENUM ('RUNNING', 'COMPLETED', 'CANCELLED', 'FAILED', 'INTERRUPTED');

-- AlterEnum
ALTER TYPE "SessionStatus" ADD VALUE 'INTERRUPTED';

-- AlterTable
ALTER TABLE "sessions" ADD COLUMN     "running_turn_id" TEXT;

-- AlterTable
ALTER TABLE "workspace_leases" ADD COLUMN     "owner_id" TEXT;

-- CreateTable
CREATE TABLE "chat_turns" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "idempotency_key" TEXT,
    "status" "ChatTurnStatus" NOT NULL DEFAULT 'RUNNING',
    "owner_id" TEXT NOT NULL,
    "heartbeat_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "user_message" TEXT NOT NULL,
    "outcome" JSONB,
    "started_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "ended_at" TIMESTAMP(3),

    CONSTRAINT "chat_turns_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "chat_turns_status_heartbeat_at_idx" ON "chat_turns"("status", "heartbeat_at");

-- CreateIndex
CREATE INDEX "chat_turns_tenant_id_session_id_started_at_idx" ON "chat_turns"("tenant_id", "session_id", "started_at");

-- CreateIndex
CREATE UNIQUE INDEX "chat_turns_session_id_idempotency_key_key" ON "chat_turns"("session_id", "idempotency_key");

-- CreateIndex
CREATE INDEX "workspace_leases_owner_id_idx" ON "workspace_leases"("owner_id");

-- AddForeignKey
ALTER TABLE "chat_turns" ADD CONSTRAINT "chat_turns_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "chat_turns" ADD CONSTRAINT "chat_turns_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE;

