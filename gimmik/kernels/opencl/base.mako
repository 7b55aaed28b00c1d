<%inherit file="gpu-base.mako"/>
## The OpenCL base every family inherits: the shared GPU base's names
## (threadIdx, __shared__, __syncthreads...) as OpenCL C spells them, B and
## C in the global address space, vector types for two columns.
<%!
    FIRST = '.x'
%>\
${next.body()}

<%def name="preamble()">\
% if dtype == 'double':
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
#ifndef GIMMIK_OPENCL_NAMES
#define GIMMIK_OPENCL_NAMES
#define threadIdx ((uint3)((uint) get_local_id(0), (uint) get_local_id(1), (uint) get_local_id(2)))
#define blockIdx ((uint3)((uint) get_group_id(0), (uint) get_group_id(1), (uint) get_group_id(2)))
#define blockDim ((uint3)((uint) get_local_size(0), (uint) get_local_size(1), (uint) get_local_size(2)))
#define gridDim ((uint3)((uint) get_num_groups(0), (uint) get_num_groups(1), (uint) get_num_groups(2)))
#define __shared__ __local
#define __restrict__ restrict
#define __syncthreads() barrier(CLK_LOCAL_MEM_FENCE)
#endif
</%def>

## A kernel of a fixed work-group size (the block).
<%def name="kernel_head()" buffered="True">__kernel __attribute__((reqd_work_group_size(${block[0]}, ${block[1]}, ${block[2]}))) void</%def>

<%def name="gq()" buffered="True">__global </%def>

<%def name="zero(w)" buffered="True">((${self.vt(w)})(0))</%def>

## Value type of one thread's column group: scalar or two columns.
<%def name="vt(w)" buffered="True">${dtype if w == 1 else dtype + '2'}</%def>

<%def name="load_b(j, col, w)" buffered="True">(*${self.ptr('b', j, 'ldbl', col, w)})</%def>

<%def name="load_c(i, col, w)" buffered="True">(*${self.ptr('c', i, 'ldcl', col, w)})</%def>

<%def name="store_c(i, col, w, val)" buffered="True">*${self.ptr('c', i, 'ldcl', col, w)} = ${val}</%def>

<%def name="wave_uniform(x)" buffered="True">${x}</%def>
