-- Issue 11. A workspace whose machine vanished behind Berth's back records that its data was lost.
ALTER TYPE "WorkspaceEventKind" ADD VALUE 'data_lost';

-- This installation's identity (one row, created on first start): labels every workspace resource so that
-- installations sharing one Docker engine, cluster or E2B team reconcile only their own.
CREATE TABLE "installation" (
    "key" TEXT NOT NULL DEFAULT 'this',
    "installation_id" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "installation_pkey" PRIMARY KEY ("key")
);

CREATE UNIQUE INDEX "installation_installation_id_key" ON "installation"("installation_id");
