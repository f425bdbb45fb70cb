-- CreateTable
CREATE TABLE "resource_samples" (
    "id" BIGSERIAL NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "workspace_id" TEXT NOT NULL,
    "cpu_seconds" DOUBLE PRECISION,
    "memory_bytes" BIGINT,
    "disk_bytes" BIGINT,
    "processes" INTEGER,
    "at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "resource_samples_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "resource_samples_tenant_id_workspace_id_at_idx" ON "resource_samples"("tenant_id", "workspace_id", "at");

-- CreateIndex
CREATE INDEX "resource_samples_at_idx" ON "resource_samples"("at");

-- AddForeignKey
ALTER TABLE "resource_samples" ADD CONSTRAINT "resource_samples_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;
