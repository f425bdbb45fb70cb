-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "label" TEXT;

-- CreateTable
CREATE TABLE "deleted_sessions" (
    "session_id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "agent_id" TEXT NOT NULL,
    "agent_name" TEXT NOT NULL,
    "deleted_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "deleted_sessions_pkey" PRIMARY KEY ("session_id")
);

-- CreateIndex
CREATE INDEX "deleted_sessions_tenant_id_deleted_at_idx" ON "deleted_sessions"("tenant_id", "deleted_at");

-- AddForeignKey
ALTER TABLE "deleted_sessions" ADD CONSTRAINT "deleted_sessions_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
