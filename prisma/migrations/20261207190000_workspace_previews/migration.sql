-- CreateTable
CREATE TABLE "workspace_previews" (
    "id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "workspace_id" TEXT NOT NULL,
    "port" INTEGER NOT NULL,
    "created_by" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "workspace_previews_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "workspace_previews_tenant_id_workspace_id_idx" ON "workspace_previews"("tenant_id", "workspace_id");

-- CreateIndex
CREATE UNIQUE INDEX "workspace_previews_workspace_id_port_key" ON "workspace_previews"("workspace_id", "port");

-- AddForeignKey
ALTER TABLE "workspace_previews" ADD CONSTRAINT "workspace_previews_tenant_id_fkey" FOREIGN KEY ("tenant_id") REFERENCES "tenants"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspace_previews" ADD CONSTRAINT "workspace_previews_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE CASCADE ON UPDATE CASCADE;
