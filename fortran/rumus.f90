! rumus.f90 - the Fortran 2008 module of rumus.
!
!   use rumus        ! gfortran -I$(pkg-config --variable=fmoddir rumus) ...
!                    !   ... -lrumusf $(pkg-config --libs rumus)
!
! It re-exports module rumus_c (fortran/rumus_c.f90, generated from rumus.h):
! every status code, storage type and option as a named constant, every
! parameter struct as a bind(C) type (with RUMUS_XENT_DEFAULTS and kin), and
! a bind(C) interface for every C function under its C name, taking
! type(c_ptr) for contexts and tensors.  The man pages (man rumus_gemm)
! are the reference for those.  Here are the wrappers where C takes
! pointers to sizes or C strings: names rumus_f_*, strings as Fortran
! character values, shapes as integer arrays in Fortran order, optional
! arguments for defaults.
!
! Layout, once for all: rumus tensors are row-major (C order, the last
! extent contiguous).  A Fortran array a(n1, n2, ..., nk) has the same bytes
! as the rumus tensor of shape [nk, ..., n2, n1].  The rumus_f_* functions
! take and give shapes in Fortran order and reverse them, so that
!     rumus_f_tensor_create(ctx, RUMUS_F32, shape(a), t)
! makes a tensor that a uploads into unchanged.  A batch of 128 inputs of
! 784 features, x(784, 128) in Fortran, is the rumus matrix [128, 784]: one
! row per sample, as rumus_gemm, rumus_cross_entropy and the other ops
! expect.  The raw interfaces of rumus_c take C order.
module rumus
  use, intrinsic :: iso_c_binding
  use rumus_c
  implicit none
  public

  interface
    function c_strlen(p) bind(C, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: p
      integer(c_size_t) :: c_strlen
    end function c_strlen
  end interface

contains

  !> A NUL-terminated C string (NULL: "") as a Fortran string.
  function rumus_f_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: n, i
    if (.not. c_associated(p)) then
      s = ""
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function rumus_f_string

  !> The calling thread's last failure on ctx (rumus_ctx_errmsg).
  function rumus_f_errmsg(ctx) result(s)
    type(c_ptr), intent(in) :: ctx
    character(:), allocatable :: s
    s = rumus_f_string(rumus_ctx_errmsg(ctx))
  end function rumus_f_errmsg

  !> The text of a status code (rumus_strerror).
  function rumus_f_strerror(status) result(s)
    integer(c_int), intent(in) :: status
    character(:), allocatable :: s
    s = rumus_f_string(rumus_strerror(status))
  end function rumus_f_strerror

  !> Why the calling thread's last context creation failed.
  function rumus_f_last_create_error() result(s)
    character(:), allocatable :: s
    s = rumus_f_string(rumus_last_create_error())
  end function rumus_f_last_create_error

  !> rumus_ctx_create: device is an index or a name substring (absent:
  !> RUMUS_DEVICE, else the first GPU, else the first device); flags
  !> defaults to 0.
  function rumus_f_ctx_create(ctx, device, flags) result(status)
    type(c_ptr), intent(out) :: ctx
    character(*), intent(in), optional :: device
    integer(c_int), intent(in), optional :: flags
    integer(c_int) :: status, f
    f = 0
    if (present(flags)) f = flags
    if (present(device)) then
      status = rumus_ctx_create(ctx, trim(device)//c_null_char, f)
    else
      status = rumus_ctx_create(ctx, flags=f)
    end if
  end function rumus_f_ctx_create

  !> rumus_tensor_create with the shape in Fortran order (see the top).
  function rumus_f_tensor_create(ctx, dtype, fshape, t) result(status)
    type(c_ptr), intent(in) :: ctx
    integer(c_int), intent(in) :: dtype
    integer, intent(in) :: fshape(:)
    type(c_ptr), intent(out) :: t
    integer(c_int) :: status
    integer(c_size_t) :: cshape(max(1, size(fshape)))
    integer :: i, n
    n = size(fshape)
    if (n > RUMUS_MAX_DIMS .or. any(fshape < 0)) then
      t = c_null_ptr
      status = RUMUS_EINVAL
      return
    end if
    do i = 1, n
      cshape(i) = int(fshape(n + 1 - i), c_size_t)
    end do
    status = rumus_tensor_create(ctx, dtype, int(n, c_int), cshape, t)
  end function rumus_f_tensor_create

  !> The extents of t in Fortran order.
  function rumus_f_tensor_shape(t) result(fshape)
    type(c_ptr), intent(in) :: t
    integer, allocatable :: fshape(:)
    integer :: i, n
    n = rumus_tensor_ndim(t)
    allocate (fshape(max(0, n)))
    do i = 1, n
      fshape(i) = int(rumus_tensor_dim(t, int(n - i, c_int)))
    end do
  end function rumus_f_tensor_shape

  !> Uploads every element of t from a (any rank, at least numel(t)
  !> reals), converted to t's floating storage type.
  function rumus_f_upload(t, a) result(status)
    type(c_ptr), intent(in) :: t
    real(c_float), intent(in) :: a(*)
    integer(c_int) :: status
    status = rumus_tensor_upload_f32(t, a, rumus_tensor_numel(t))
  end function rumus_f_upload

  !> Downloads every element of t into a, as reals.
  function rumus_f_download(t, a) result(status)
    type(c_ptr), intent(in) :: t
    real(c_float), intent(out) :: a(*)
    integer(c_int) :: status
    status = rumus_tensor_download_f32(t, a, rumus_tensor_numel(t))
  end function rumus_f_download

  !> Uploads class indices or token ids into an RUMUS_I32 tensor.
  function rumus_f_upload_i32(t, a) result(status)
    type(c_ptr), intent(in) :: t
    integer(c_int32_t), intent(in), target :: a(*)
    integer(c_int) :: status
    status = rumus_tensor_upload(t, c_loc(a(1)), rumus_tensor_nbytes(t))
  end function rumus_f_upload_i32

end module rumus
