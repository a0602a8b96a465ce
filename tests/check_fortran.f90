! check_fortran.f90 - a few ops through the Fortran module, compared bit
! for bit with the same ops through the C API (tests/fortran_c_side.c),
! plus the module's wrappers: Fortran-order shapes, strings, optional
! arguments, named constants.  Exit status 0 on success, 1 on a mismatch,
! 77 (skipped) when there is no OpenCL device.
program check_fortran
  use rumus
  implicit none
  interface
    function fortran_c_side(x, w, targets, softmax, gemm, loss, w_after) &
        bind(C, name="fortran_c_side")
      import :: c_float, c_int
      real(c_float), intent(in) :: x(*), w(*)
      integer(c_int), intent(in) :: targets(*)
      real(c_float), intent(out) :: softmax(*), gemm(*), loss(*), w_after(*)
      integer(c_int) :: fortran_c_side
    end function fortran_c_side
  end interface
  type(c_ptr) :: ctx, tx, tw, ty, tc, tt, tl, tg, tm, tv, tgr
  real(c_float) :: x(6, 4), w(6, 3), y(6, 4), c(3, 4), loss(1), w1(6, 3)
  real(c_float) :: cy(6, 4), cc(3, 4), closs(1), cw1(6, 3)
  integer(c_int32_t) :: targets(4) = [2, 0, 5, 3]
  type(rumus_adam_params) :: adam
  integer :: i, j, failures
  integer(c_int) :: st
  integer, allocatable :: shp(:)


  do j = 1, 4
    do i = 1, 6
      x(i, j) = real(mod(i * 7 + j * 3, 11), c_float) / 4.0 - 1.25
    end do
  end do
  do j = 1, 3
    do i = 1, 6
      w(i, j) = real(mod(i * 5 + j * 2, 7), c_float) / 8.0 - 0.4
    end do
  end do

  st = rumus_f_ctx_create(ctx)
  if (st == RUMUS_ENODEVICE) then
    print '(a)', 'SKIP: no OpenCL device: '//rumus_f_last_create_error()
    stop 77
  end if
  call check(st, 'rumus_f_ctx_create')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, shape(x), tx), 'create x')
  shp = rumus_f_tensor_shape(tx)
  if (any(shp /= [6, 4]) .or. rumus_tensor_dim(tx, 0_c_int) /= 4) &
    call fail('Fortran-order shape of x: got '//str(shp(1))//' x '//str(shp(2)))
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, shape(w), tw), 'create w')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, shape(y), ty), 'create y')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, shape(c), tc), 'create c')
  call check(rumus_f_tensor_create(ctx, RUMUS_I32, [4], tt), 'create targets')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, [integer ::], tl), 'create loss')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, shape(x), tg), 'create grad')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, shape(w), tm), 'create m')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, shape(w), tv), 'create v')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, shape(w), tgr), 'create g')
  call check(rumus_f_upload(tx, x), 'upload x')
  call check(rumus_f_upload(tw, w), 'upload w')
  call check(rumus_f_upload_i32(tt, targets), 'upload targets')
  call check(rumus_f_upload(tgr, x), 'upload g')
  call check(rumus_tensor_fill(tm, 0.0), 'fill m')
  call check(rumus_tensor_fill(tv, 0.0), 'fill v')
  call check(rumus_softmax_fwd(ctx, tx, ty), 'softmax')
  call check(rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_TRANS, 1.0, tx, tw, 0.0, tc), 'gemm')
  call check(rumus_cross_entropy(ctx, tx, tt, tl, tg), 'cross-entropy')
  adam = rumus_adam_params(1e-3, 0.9, 0.999, 1e-8, 0.01, 1)
  call check(rumus_adam_step(ctx, adam, 1_c_long, tw, tgr, tm, tv), 'adam')
  call check(rumus_f_download(ty, y), 'download y')
  call check(rumus_f_download(tc, c), 'download c')
  call check(rumus_f_download(tl, loss), 'download loss')
  call check(rumus_f_download(tw, w1), 'download w')
  call check(rumus_ctx_sync(ctx), 'sync')

  ! A bad shape: the status code and the message as Fortran values.
  st = rumus_softmax_fwd(ctx, tx, tc)
  if (st /= RUMUS_ESHAPE) call fail('softmax into a wrong shape gave '//str(st))
  if (len(rumus_f_errmsg(ctx)) == 0) call fail('no message for RUMUS_ESHAPE')
  if (rumus_f_strerror(RUMUS_ESHAPE) /= 'shape mismatch') call fail('strerror')

  call check(fortran_c_side(x, w, targets, cy, cc, closs, cw1), 'the C side')
  failures = 0
  call same('softmax', y, cy, 24)
  call same('gemm', c, cc, 12)
  call same('cross-entropy', loss, closs, 1)
  call same('adamw', w1, cw1, 18)
  ! The values themselves: each row of the softmax sums to 1.
  do j = 1, 4
    if (abs(sum(y(:, j)) - 1.0) > 1e-6) call fail('softmax row '//str(j)//' does not sum to 1')
  end do
  if (failures > 0) stop 1
  call rumus_tensor_free(tx)
  call rumus_tensor_free(tw)
  call rumus_tensor_free(ty)
  call rumus_tensor_free(tc)
  call rumus_tensor_free(tt)
  call rumus_tensor_free(tl)
  call rumus_tensor_free(tg)
  call rumus_tensor_free(tm)
  call rumus_tensor_free(tv)
  call rumus_tensor_free(tgr)
  call check(rumus_ctx_free(ctx), 'rumus_ctx_free')
  deallocate (shp)
  print '(a)', 'check_fortran: every result equals the C API''s bit for bit'

contains

  subroutine check(status, what)
    integer(c_int), intent(in) :: status
    character(*), intent(in) :: what
    if (status /= RUMUS_OK) then
      print '(a)', what//': '//rumus_f_strerror(status)//': '//rumus_f_errmsg(ctx)
      stop 1
    end if
  end subroutine check

  subroutine fail(msg)
    character(*), intent(in) :: msg
    print '(a)', 'FAIL: '//msg
    stop 1
  end subroutine fail

  subroutine same(what, a, b, n)
    character(*), intent(in) :: what
    integer, intent(in) :: n
    real(c_float), intent(in) :: a(n), b(n)
    integer :: k
    do k = 1, n
      if (transfer(a(k), 0_c_int32_t) /= transfer(b(k), 0_c_int32_t)) then
        print '(a, i0, a, es16.8, a, es16.8)', 'FAIL: '//what//' element ', k, ': ', a(k), &
          ' against C ', b(k)
        failures = failures + 1
        return
      end if
    end do
  end subroutine same

  function str(v) result(s)
    integer, intent(in) :: v
    character(:), allocatable :: s
    character(16) :: buf
    write (buf, '(i0)') v
    s = trim(buf)
  end function str
end program check_fortran
