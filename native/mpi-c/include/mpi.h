/*
 * mpi.h: Kestrel's MPI C ABI, the one statement of it.
 *
 * Everything a C program sees of Kestrel's MPI library is declared here: handle types,
 * constants, MPI_Status and the function prototypes. The Rust side (crate kestrel-mpi-c,
 * native/mpi-c) reads this file with bindgen when it builds, so it never restates a value;
 * native/mpi-c/tests/abi_drift.rs compiles a C probe against this file (with gcc, and with the
 * PowerPC cross gcc) and fails when the Rust crate's view (sizes, field offsets, constant
 * values) differs from the C compiler's. C programs build with scripts/kestrel-mpicc.
 *
 * Choices (native/mpi-c/README.md says more):
 *  - Handles are C ints, as in MPICH: they cross the ABI by value, fit in a register, compare
 *    with ==, and need no allocation for the predefined ones. A handle's top byte is its kind
 *    (0x44 communicator, 0x4c datatype, 0x58 operation, 0x54 error handler, 0x6c request); the
 *    null handle of a kind has bit 30 clear (0x04..., 0x0c..., ...); the low 24 bits are an index.
 *    Every handle value is positive, so it is also a valid Rust i32 constant.
 *  - The predefined datatypes carry no size in the handle: MPI_Type_size answers from the C
 *    types of the target (long is 4 bytes on the PowerPC 440, 8 on an x86_64 host).
 *  - An error code is its own error class (MPI_Error_class is the identity on valid codes).
 *  - The library is MPI 3.1 in its names and semantics, a subset of the calls (those below).
 *  - Reductions follow MPI 3.1 section 5.9.2's table exactly: MPI_CHAR is in none, and the
 *    logical operations take no floating type (MPICH accepts both).
 *
 * C99; no other header is included, so it compiles with powerpc-linux-gnu-gcc -static and with
 * a host gcc alike.
 */
#ifndef KESTREL_MPI_H
#define KESTREL_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

/* The MPI standard this library follows (MPI_Get_version answers these). */
#define MPI_VERSION 3
#define MPI_SUBVERSION 1

/* ---- Handles ---------------------------------------------------------------------------- */

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;

/* Communicators. Those made by MPI_Comm_dup and MPI_Comm_split are 0x44000002 and up. */
#define MPI_COMM_NULL 0x04000000
#define MPI_COMM_WORLD 0x44000000
#define MPI_COMM_SELF 0x44000001

/* Error handlers (MPI_Comm_set_errhandler). */
#define MPI_ERRHANDLER_NULL 0x14000000
#define MPI_ERRORS_ARE_FATAL 0x54000000
#define MPI_ERRORS_RETURN 0x54000001

/* Requests (MPI_Isend, MPI_Irecv). A completed request is set to MPI_REQUEST_NULL. */
#define MPI_REQUEST_NULL 0x2c000000

/* Predefined datatypes: 0x4c000000 | index. */
#define MPI_DATATYPE_NULL 0x0c000000
#define MPI_CHAR 0x4c000001
#define MPI_SIGNED_CHAR 0x4c000002
#define MPI_UNSIGNED_CHAR 0x4c000003
#define MPI_BYTE 0x4c000004
#define MPI_SHORT 0x4c000005
#define MPI_UNSIGNED_SHORT 0x4c000006
#define MPI_INT 0x4c000007
#define MPI_UNSIGNED 0x4c000008
#define MPI_LONG 0x4c000009
#define MPI_UNSIGNED_LONG 0x4c00000a
#define MPI_LONG_LONG_INT 0x4c00000b
#define MPI_LONG_LONG MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG 0x4c00000c
#define MPI_FLOAT 0x4c00000d
#define MPI_DOUBLE 0x4c00000e
#define MPI_LONG_DOUBLE 0x4c00000f
#define MPI_C_BOOL 0x4c000010
#define MPI_INT8_T 0x4c000011
#define MPI_INT16_T 0x4c000012
#define MPI_INT32_T 0x4c000013
#define MPI_INT64_T 0x4c000014
#define MPI_UINT8_T 0x4c000015
#define MPI_UINT16_T 0x4c000016
#define MPI_UINT32_T 0x4c000017
#define MPI_UINT64_T 0x4c000018
/* Value-index pairs for MPI_MAXLOC and MPI_MINLOC: struct { T value; int index; } in C's layout
 * (MPI_2INT is struct { int value; int index; }). */
#define MPI_2INT 0x4c000020
#define MPI_FLOAT_INT 0x4c000021
#define MPI_DOUBLE_INT 0x4c000022
#define MPI_LONG_INT 0x4c000023
#define MPI_SHORT_INT 0x4c000024
#define MPI_LONG_DOUBLE_INT 0x4c000025

/* Predefined reduction operations: 0x58000000 | index. */
#define MPI_OP_NULL 0x18000000
#define MPI_MAX 0x58000001
#define MPI_MIN 0x58000002
#define MPI_SUM 0x58000003
#define MPI_PROD 0x58000004
#define MPI_LAND 0x58000005
#define MPI_BAND 0x58000006
#define MPI_LOR 0x58000007
#define MPI_BOR 0x58000008
#define MPI_LXOR 0x58000009
#define MPI_BXOR 0x5800000a
#define MPI_MINLOC 0x5800000b
#define MPI_MAXLOC 0x5800000c

/* ---- Other constants -------------------------------------------------------------------- */

#define MPI_ANY_SOURCE (-2)
#define MPI_ANY_TAG (-1)
#define MPI_PROC_NULL (-1)
#define MPI_ROOT (-3)
/* MPI_Comm_split's color for "no new communicator"; MPI_Waitany's index when none was active. */
#define MPI_UNDEFINED (-32766)

#define MPI_MAX_PROCESSOR_NAME 128
#define MPI_MAX_ERROR_STRING 512

/* Thread support levels (MPI_Init_thread, MPI_Query_thread), in increasing order. */
#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

/* Error classes. Every error code Kestrel returns is one of these. */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_ROOT 7
#define MPI_ERR_GROUP 8
#define MPI_ERR_OP 9
#define MPI_ERR_TOPOLOGY 10
#define MPI_ERR_DIMS 11
#define MPI_ERR_ARG 12
#define MPI_ERR_UNKNOWN 13
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_OTHER 15
#define MPI_ERR_INTERN 16
#define MPI_ERR_IN_STATUS 17
#define MPI_ERR_PENDING 18
#define MPI_ERR_REQUEST 19
#define MPI_ERR_LASTCODE 19

/* ---- Status and the special buffer addresses -------------------------------------------- */

/* The public fields are MPI's; the kestrel_ ones are the library's own (MPI_Get_count reads
 * kestrel_count, the number of bytes received). */
typedef struct MPI_Status {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int kestrel_count;
    int kestrel_cancelled;
} MPI_Status;

/* Pointer constants: not dereferenced, only compared. MPI_STATUS_IGNORE and
 * MPI_STATUSES_IGNORE are the address 1 (never a valid MPI_Status); MPI_IN_PLACE is the
 * all-ones address. */
#define MPI_STATUS_IGNORE ((MPI_Status *)1)
#define MPI_STATUSES_IGNORE ((MPI_Status *)1)
#define MPI_IN_PLACE ((void *)-1)
#define MPI_BOTTOM ((void *)0)

/* ---- Functions -------------------------------------------------------------------------- */

/* Environment */
int MPI_Init(int *argc, char ***argv);
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided);
int MPI_Query_thread(int *provided);
int MPI_Finalize(void);
int MPI_Initialized(int *flag);
int MPI_Finalized(int *flag);
int MPI_Abort(MPI_Comm comm, int errorcode);
double MPI_Wtime(void);
double MPI_Wtick(void);
int MPI_Get_processor_name(char *name, int *resultlen);
int MPI_Get_version(int *version, int *subversion);
int MPI_Error_string(int errorcode, char *string, int *resultlen);
int MPI_Error_class(int errorcode, int *errorclass);

/* Communicators */
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);

/* Datatypes */
int MPI_Type_size(MPI_Datatype datatype, int *size);
int MPI_Get_count(const MPI_Status *status, MPI_Datatype datatype, int *count);

/* Point to point */
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status);
int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);

/* Completion */
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]);
int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[]);

/* Collectives */
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* KESTREL_MPI_H */
