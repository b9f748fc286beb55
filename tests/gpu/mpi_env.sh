# shellcheck shell=bash
# mpi_env.sh — sourced: points the environment at an Open MPI staged by
# tests/gpu/gpu_pack.sh in folder $1 (Debian's layout with /usr stripped), so its
# mpirun, orted, libraries, components and help files are found there.
# Components whose libraries the machine lacks (UCX, libfabric, verbs, PSM)
# are skipped without a message; shared memory and TCP remain.
mpi_prefix=$(cd "$1" && pwd)
mpi_arch=""
for d in "$mpi_prefix"/lib/*-linux-gnu; do mpi_arch=$(basename "$d"); done
export OPAL_PREFIX=$mpi_prefix
export PMIX_PREFIX=$mpi_prefix/lib/$mpi_arch/pmix2
export PMIX_MCA_mca_base_component_path=$PMIX_PREFIX/lib/pmix
export OMPI_MCA_mca_base_component_show_load_errors=0
export PATH=$mpi_prefix/bin${PATH:+:$PATH}
export LD_LIBRARY_PATH=$mpi_prefix/lib/$mpi_arch:$mpi_prefix/lib/$mpi_arch/openmpi/lib:$PMIX_PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset mpi_arch
