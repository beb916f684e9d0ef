"""The compaction RPCs: ManualCompaction, GetCompactionState, GetCompactionStateWithPlans
(pymilvus ``compact``, ``get_compaction_state``, ``get_compaction_plans``).

A mixin of :class:`services.proxy.grpc_service.MilvusService`, which supplies ``proxy``.
Datacoord plans the job and the data node executes it (docs/compaction.md); the job id
answers the state calls. Only mix compaction exists: a clustering (``is_clustering``) or
L0 request is refused rather than silently run as something else.
"""

from __future__ import annotations

from typing import Any

from pymilvus.grpc_gen import milvus_pb2

from vectide.services.common import errors
from vectide.services.common.errors import Code, MilvusError
from vectide.services.common.names import qualified
from vectide.services.proxy.context import DataCoordPort
from vectide.services.proxy.core import Proxy
from vectide.services.proxy.grpc_common import db_of, ok, rpc


class CompactionRpcs:
    proxy: Proxy

    @rpc(milvus_pb2.ManualCompactionResponse)
    def ManualCompaction(self, request, context):
        if request.majorCompaction or request.l0Compaction:
            raise errors.invalid("only mix compaction is supported: clustering and L0 are not")
        if request.collection_name:
            name = qualified(db_of(request, context), request.collection_name)
            info = self.proxy.describe_collection(name)
        else:
            info = self.proxy.describe_collection(collection_id=request.collectionID)
        job_id, plans = self._datacoord().compact(info.collection_id)
        return milvus_pb2.ManualCompactionResponse(
            status=ok(), compactionID=job_id, compactionPlanCount=plans
        )

    @rpc(milvus_pb2.GetCompactionStateResponse)
    def GetCompactionState(self, request, context):
        state = self._datacoord().compaction_state(_job_id(request))
        return milvus_pb2.GetCompactionStateResponse(
            status=ok(),
            state=state.state,
            executingPlanNo=state.executing,
            timeoutPlanNo=state.timeout,
            completedPlanNo=state.completed,
            failedPlanNo=state.failed,
        )

    @rpc(milvus_pb2.GetCompactionPlansResponse)
    def GetCompactionStateWithPlans(self, request, context):
        datacoord = self._datacoord()
        job_id = _job_id(request)
        return milvus_pb2.GetCompactionPlansResponse(
            status=ok(),
            state=datacoord.compaction_state(job_id).state,
            mergeInfos=[
                milvus_pb2.CompactionMergeInfo(sources=sources, target=target)
                for sources, target in datacoord.compaction_plans(job_id)
            ],
        )

    def _datacoord(self) -> DataCoordPort:
        if self.proxy.datacoord is None:
            raise MilvusError(Code.SERVICE_NOT_READY, "compaction needs the data coordinator")
        return self.proxy.datacoord


def _job_id(request: Any) -> int:
    if request.compactionID <= 0:
        raise errors.invalid(f"invalid compaction id {request.compactionID}")
    return request.compactionID
