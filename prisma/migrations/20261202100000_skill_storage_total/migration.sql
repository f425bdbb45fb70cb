-- CreateTable
CREATE TABLE "skill_storage" (
    "workspace_id" TEXT NOT NULL,
    "partition" TEXT NOT NULL,
    "dir" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "bytes" BIGINT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "skill_storage_pkey" PRIMARY KEY ("workspace_id","partition","dir")
);

-- CreateIndex
CREATE INDEX "skill_storage_tenant_id_idx" ON "skill_storage"("tenant_id");

-- AddForeignKey
ALTER TABLE "skill_storage" ADD CONSTRAINT "skill_storage_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
