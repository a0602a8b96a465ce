! train_mlp.f90 - trains a small network from Fortran through the rumus
! module: a 2-32-3 multilayer perceptron (Linear, ReLU, Linear) that
! classifies points drawn around three centres in the plane, with every
! forward, backward and AdamW step on the OpenCL device.
!
!   gfortran -I$(pkg-config --variable=fmoddir rumus) train_mlp.f90 \
!            -lrumusf $(pkg-config --libs rumus) -o train_mlp
!
! Arrays are in Fortran order: the batch x(2, n) is the rumus matrix
! [n, 2], one row per point (see fortran/rumus.f90).  Prints the loss every
! 50 steps and the final accuracy; exits 1 if training failed to reach 90%.
program train_mlp
  use rumus
  implicit none
  integer, parameter :: n = 300, d_in = 2, d_hid = 32, d_out = 3, steps = 300
  real(c_float) :: x(d_in, n), w1(d_in, d_hid), b1(d_hid), w2(d_hid, d_out), b2(d_out)
  real(c_float) :: logits(d_out, n), loss(1), r(2)
  integer(c_int32_t) :: labels(n)
  type(c_ptr) :: ctx, tx, ty, tw1, tb1, tw2, tb2, tz1, th1, tz2, tloss
  type(c_ptr) :: tg1, tgb1, tg2, tgb2, tdz2, tdh1, tm(4), tv(4)
  type(rumus_adam_params) :: adam
  integer :: i, step, correct, k

  call make_data()
  call check(rumus_f_ctx_create(ctx), 'context')
  call new(tx, [d_in, n]); call new(tz1, [d_hid, n]); call new(th1, [d_hid, n])
  call new(tz2, [d_out, n]); call new(tdz2, [d_out, n]); call new(tdh1, [d_hid, n])
  call new(tw1, [d_in, d_hid]); call new(tb1, [d_hid]); call new(tw2, [d_hid, d_out])
  call new(tb2, [d_out]); call new(tg1, [d_in, d_hid]); call new(tgb1, [d_hid])
  call new(tg2, [d_hid, d_out]); call new(tgb2, [d_out])
  call check(rumus_f_tensor_create(ctx, RUMUS_I32, [n], ty), 'labels')
  call check(rumus_f_tensor_create(ctx, RUMUS_F32, [integer ::], tloss), 'loss')
  call new(tm(1), [d_in, d_hid]); call new(tv(1), [d_in, d_hid])
  call new(tm(2), [d_hid]); call new(tv(2), [d_hid])
  call new(tm(3), [d_hid, d_out]); call new(tv(3), [d_hid, d_out])
  call new(tm(4), [d_out]); call new(tv(4), [d_out])
  do k = 1, 4
    call check(rumus_tensor_fill(tm(k), 0.0), 'zero m')
    call check(rumus_tensor_fill(tv(k), 0.0), 'zero v')
  end do
  call init(w1, 1.0 / sqrt(real(d_in))); call init(b1, 1.0 / sqrt(real(d_in)))
  call init(w2, 1.0 / sqrt(real(d_hid))); call init(b2, 1.0 / sqrt(real(d_hid)))
  call check(rumus_f_upload(tx, x), 'x'); call check(rumus_f_upload_i32(ty, labels), 'y')
  call check(rumus_f_upload(tw1, w1), 'w1'); call check(rumus_f_upload(tb1, b1), 'b1')
  call check(rumus_f_upload(tw2, w2), 'w2'); call check(rumus_f_upload(tb2, b2), 'b2')
  adam = rumus_adam_params(0.01, 0.9, 0.999, 1e-8, 0.01, 1)

  do step = 1, steps
    ! Forward: z1 = x W1^T + b1, h1 = relu(z1), z2 = h1 W2^T + b2 (W as
    ! nn.Linear.weight: [out, in] in C order, w(in, out) in Fortran).
    call check(rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_TRANS, 1.0, tx, tw1, 0.0, tz1), 'z1')
    call check(rumus_bias_add(ctx, tz1, tb1), 'b1')
    call check(rumus_activation_fwd(ctx, RUMUS_ACT_RELU, 0.0, tz1, th1), 'relu')
    call check(rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_TRANS, 1.0, th1, tw2, 0.0, tz2), 'z2')
    call check(rumus_bias_add(ctx, tz2, tb2), 'b2')
    ! Loss and its gradient in one op, then the backward pass.
    call check(rumus_cross_entropy(ctx, tz2, ty, tloss, tdz2), 'loss')
    call check(rumus_gemm(ctx, RUMUS_TRANS, RUMUS_NO_TRANS, 1.0, tdz2, th1, 0.0, tg2), 'dW2')
    call check(rumus_bias_grad(ctx, tdz2, tgb2), 'db2')
    call check(rumus_gemm(ctx, RUMUS_NO_TRANS, RUMUS_NO_TRANS, 1.0, tdz2, tw2, 0.0, tdh1), 'dh1')
    call check(rumus_activation_bwd(ctx, RUMUS_ACT_RELU, 0.0, tz1, tdh1, tdh1), 'relu bwd')
    call check(rumus_gemm(ctx, RUMUS_TRANS, RUMUS_NO_TRANS, 1.0, tdh1, tx, 0.0, tg1), 'dW1')
    call check(rumus_bias_grad(ctx, tdh1, tgb1), 'db1')
    call check(rumus_adam_step(ctx, adam, int(step, c_long), tw1, tg1, tm(1), tv(1)), 'W1')
    call check(rumus_adam_step(ctx, adam, int(step, c_long), tb1, tgb1, tm(2), tv(2)), 'b1')
    call check(rumus_adam_step(ctx, adam, int(step, c_long), tw2, tg2, tm(3), tv(3)), 'W2')
    call check(rumus_adam_step(ctx, adam, int(step, c_long), tb2, tgb2, tm(4), tv(4)), 'b2')
    if (mod(step, 50) == 0 .or. step == 1) then
      call check(rumus_f_download(tloss, loss), 'download loss')
      call check(rumus_ctx_sync(ctx), 'sync')
      print '(a, i4, a, f8.5)', 'step ', step, '  loss ', loss(1)
    end if
  end do
  call check(rumus_f_download(tz2, logits), 'download logits')
  call check(rumus_ctx_sync(ctx), 'sync')
  correct = 0
  do i = 1, n
    if (maxloc(logits(:, i), 1) - 1 == labels(i)) correct = correct + 1
  end do
  print '(a, f6.2, a)', 'training accuracy ', 100.0 * correct / n, '%'
  ! Every tensor is freed before its context.
  do k = 1, 4
    call rumus_tensor_free(tm(k))
    call rumus_tensor_free(tv(k))
  end do
  call free_all([tx, ty, tw1, tb1, tw2, tb2, tz1, th1, tz2, tloss, tg1, tgb1, &
                 tg2, tgb2, tdz2, tdh1])
  call check(rumus_ctx_free(ctx), 'rumus_ctx_free')
  if (correct < 9 * n / 10) stop 1

contains

  subroutine free_all(ts)
    type(c_ptr), intent(in) :: ts(:)
    integer :: j
    do j = 1, size(ts)
      call rumus_tensor_free(ts(j))
    end do
  end subroutine free_all

  subroutine new(t, fshape)
    type(c_ptr), intent(out) :: t
    integer, intent(in) :: fshape(:)
    call check(rumus_f_tensor_create(ctx, RUMUS_F32, fshape, t), 'tensor')
  end subroutine new

  subroutine check(status, what)
    integer(c_int), intent(in) :: status
    character(*), intent(in) :: what
    if (status == RUMUS_ENODEVICE) then
      print '(a)', 'no OpenCL device: '//rumus_f_last_create_error()
      stop 77
    end if
    if (status /= RUMUS_OK) then
      print '(a)', what//': '//rumus_f_strerror(status)//': '//rumus_f_errmsg(ctx)
      stop 2
    end if
  end subroutine check

  ! Three clusters around the vertices of a triangle (a fixed seed).
  subroutine make_data()
    integer :: seed_size
    integer, allocatable :: seed(:)
    real(c_float), parameter :: cx(3) = [0.0, 2.0, 1.0], cy(3) = [0.0, 0.0, 1.7]
    call random_seed(size=seed_size)
    allocate (seed(seed_size))
    seed = 42
    call random_seed(put=seed)
    do i = 1, n
      labels(i) = int(mod(i, 3), c_int32_t)
      call random_number(r)
      x(1, i) = cx(labels(i) + 1) + 0.6 * (r(1) - 0.5)
      x(2, i) = cy(labels(i) + 1) + 0.6 * (r(2) - 0.5)
    end do
  end subroutine make_data

  subroutine init(a, bound)
    real(c_float), intent(out) :: a(..)
    real, intent(in) :: bound
    select rank (a)
    rank (1)
      call random_number(a)
      a = bound * (2 * a - 1)
    rank (2)
      call random_number(a)
      a = bound * (2 * a - 1)
    end select
  end subroutine init
end program train_mlp
